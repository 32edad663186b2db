"""Switching tabs moves focus once: a deferred focus for a tab the user has left never fires.

It used to: each switch scheduled its view's focus for after the next refresh; when that ran
after the user had moved on, TabbedContent switched back to the old tab, whose deferred focus
then switched again. The two tabs took turns, each turn a Footer rebuild, for up to tens of
seconds at full CPU (measured: pressing "3" took 2-10 s), and sometimes the wrong tab won.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tui_pilot import settle

from dynscope.model import Capture
from dynscope.tui.app import DynscopeApp

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = sorted((ROOT / "tests" / "data" / "captures").glob("*/graph_breaks_eager.dynscope"))[-1]


def _switch(keys: str) -> tuple[str, str, int]:
    """(the active tab, the pane holding the focused widget, how many times focus moved)."""

    async def main() -> tuple[str, str, int]:
        with Capture.open(str(CAPTURE)) as capture:
            app = DynscopeApp(capture, export_html=lambda out: None)
            async with app.run_test(size=(120, 40)) as pilot:
                moves = 0

                def moved(_focused: object) -> None:
                    nonlocal moves
                    moves += 1

                app.screen.watch(app.screen, "focused", moved, init=False)
                await pilot.press(*keys)  # at once, as the overview is still being shown
                await settle(app, pilot)
                await pilot.pause(0.2)  # time for any late focus to fire
                focused = app.screen.focused
                pane = next((a.id for a in (focused.ancestors if focused else []) if a.id in
                             {tab for tab, _ in DynscopeApp.TABS}), "")
                return app.query_one("#tabs").active, pane or "", moves

    return asyncio.run(main())


def test_one_switch_lands_on_its_tab():
    active, pane, moves = _switch("3")
    assert (active, pane) == ("breaks", "breaks")
    assert moves <= 3  # onto the overview's list, away from it (dropped), onto the breaks list


def test_quick_switches_end_on_the_last_tab_pressed():
    active, pane, moves = _switch("3253")
    assert (active, pane) == ("breaks", "breaks")
    assert moves <= 1 + 2 * 4
