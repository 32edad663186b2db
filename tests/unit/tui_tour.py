"""Drive every view and panel of the TUI over one capture and report, as JSON on stdout, what
each screen would write to the terminal that is unsafe (tests/unit/test_security_escaping.py).

Run in a process of its own: ``python tui_tour.py CAPTURE`` (cwd: the reader's directory)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]

from hostile_views import unsafe_in  # noqa: E402


def _screen_faults(app, shown: list[str]) -> list[str]:
    """Unsafe characters or links in what the current screen would write to the terminal, in
    its notifications and in the app's titles. What the screen shows is added to ``shown``."""
    update = app.screen._compositor.render_full_update()
    faults = [f for text in (app.title, app.sub_title, *(n.message for n in app._notifications))
              for f in unsafe_in(text)]
    for strips in update.strips:
        for strip in strips:
            for segment in strip:
                if segment.control is not None:
                    continue
                faults += unsafe_in(segment.text)
                shown.append(segment.text)
                if segment.style is not None and segment.style.link:
                    faults.append(f"link {segment.style.link!r}")
    return sorted(set(faults))


def _tui_tour(path: Path, shown: list[str], *, size=(120, 40)) -> list[tuple[str, list[str]]]:

    from tui_pilot import settle

    from dynscope.model import Capture
    from dynscope.tui.app import DynscopeApp

    seen: list[tuple[str, list[str]]] = []

    async def look(app, pilot, where: str) -> None:
        await settle(app, pilot)
        seen.append((where, _screen_faults(app, shown)))
        print(f"{time.perf_counter():.1f} {where}", file=sys.stderr, flush=True)

    async def main() -> None:
        with Capture.open(str(path)) as capture:
            app = DynscopeApp(capture, export_html=lambda out: None)
            async with app.run_test(size=size) as pilot:
                await look(app, pilot, "overview")
                await pilot.press("down", "enter")  # the top problem's own view
                await look(app, pilot, "top problem")
                for key in "12345":
                    await pilot.press(key)
                    await look(app, pilot, f"view {key}")
                    await pilot.press("down", "down", "enter")
                    await look(app, pilot, f"view {key} panel")
                    if app.screen is not app.screen_stack[0]:
                        await pilot.press("escape")
                        await look(app, pilot, f"view {key} back")
                # The stage stepper, stage after stage, and a stage's diff.
                await pilot.press("2")
                await settle(app, pilot)
                for _ in range(6):
                    await pilot.press("right")
                    await look(app, pilot, "stepper")
                await pilot.press("d")
                await look(app, pilot, "stage diff")
            # A fresh app for search, help, palette and export. (Opening every break listing's
            # last entry in turn, here, stalled Textual for minutes in some runs; each view's
            # panel is opened above.)
            app = DynscopeApp(capture, export_html=lambda out: None)
            async with app.run_test(size=size) as pilot:
                await pilot.press("slash", *"pwned")
                await look(app, pilot, "search")
                await pilot.press("enter")
                await look(app, pilot, "search hit")
                await pilot.press("escape", "question_mark")
                await look(app, pilot, "help")
                await pilot.press("escape", "ctrl+p", *"graph")
                await look(app, pilot, "palette")
                await pilot.press("escape", "e")
                await look(app, pilot, "export notice")

    asyncio.run(main())
    return seen


if __name__ == "__main__":
    shown: list[str] = []
    seen = _tui_tour(Path(sys.argv[1]), shown)
    json.dump({"seen": seen, "shown": "".join(shown)}, sys.stdout)
