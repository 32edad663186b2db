"""Regenerate the README's screenshots from the recorded captures in tests/data/captures/.

    .venv/bin/python docs/screenshots/make.py            # TUI (SVG) and HTML report (PNG)
    .venv/bin/python docs/screenshots/make.py --tui-only # no Chromium needed

The terminal UI's screens are Textual's own SVG export of the app driven by its Pilot
(``run_test``); the HTML report is the page as headless Chromium draws it, with the flags
tests/browser.py uses. No torch is needed: the captures were recorded already (the newest
torch version's directory is used). Run it after a change to a view; commit what changes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from dynscope.tui.app import DynscopeApp

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "tests" / "data" / "captures"
OUT = Path(__file__).resolve().parent
TERMINAL_SIZE = (120, 34)  # wide enough for the side-by-side layout (the app's breakpoint is 120)
PAGE_SIZE = (1280, 900)


@dataclass(frozen=True)
class TuiShot:
    """One screen: the file it is saved as, the capture it shows and the keys that reach it."""

    name: str
    capture: str
    keys: tuple[str, ...]
    title: str


TUI_SHOTS = (
    TuiShot("tui-overview", "recompiles_eager", (), "dynscope tui: the overview"),
    TuiShot("tui-graph-breaks", "graph_breaks_eager", ("3",), "dynscope tui: graph breaks"),
    TuiShot("tui-recompiles", "recompiles_eager", ("4",), "dynscope tui: recompiles and guards"),
    TuiShot("tui-stage-stepper", "conv_net_inductor", ("2", *"nnnnnn"), "dynscope tui: the stage stepper at Inductor's post-grad graph"),
    TuiShot("tui-kernels", "conv_net_inductor", ("5",), "dynscope tui: kernels and where they came from"),
)
HTML_SHOT = ("report-html", "graph_breaks_eager")


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name.partition("+")[0]))


def newest_captures(root: Path = CAPTURES) -> Path:
    """The directory of the newest torch version's captures (2.15.0+cu132 after 2.6.0+cu124)."""
    versions = [d for d in root.iterdir() if d.is_dir() and (d / "graph_breaks_eager.dynscope").is_file()]
    if not versions:
        raise SystemExit(f"make.py: no recorded captures under {root}")
    return max(versions, key=lambda d: _version_key(d.name))


async def _settle(app: DynscopeApp, pilot: Pilot[None]) -> None:
    """Until every worker has finished and what it posted has been handled."""
    while True:
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.is_running for w in app.workers):
            return


async def _tui_shot(shot: TuiShot, captures: Path, out: Path) -> Path:
    from dynscope.model import Capture
    from dynscope.tui.app import DynscopeApp

    with Capture.open(str(captures / f"{shot.capture}.dynscope")) as capture:
        # hide_volatile: no timings, machine paths or object ids, so a rerun changes only what a view changed.
        app = DynscopeApp(capture, hide_volatile=True)
        async with app.run_test(size=TERMINAL_SIZE) as pilot:
            await _settle(app, pilot)
            for key in shot.keys:
                await pilot.press(key)
                await _settle(app, pilot)
            target = out / f"{shot.name}.svg"
            target.write_text(app.export_screenshot(title=shot.title), encoding="utf-8")
            return target


def tui_screenshots(out: Path = OUT, captures: Path | None = None, shots: tuple[TuiShot, ...] = TUI_SHOTS) -> list[Path]:
    """Write one SVG per shot into ``out``; returns their paths."""
    where = captures or newest_captures()
    return [asyncio.run(_tui_shot(shot, where, out)) for shot in shots]


def html_screenshot(out: Path = OUT, captures: Path | None = None) -> Path:
    """Write the HTML report of a capture, then Chromium's PNG of its first screen."""
    sys.path.insert(0, str(REPO / "tests"))
    from browser import _FLAGS, find_chromium  # the flags for a closed network, kept in one place

    from dynscope.commands.report import write_report

    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("make.py: no Chromium found (chromium, google-chrome); use --tui-only")
    name, capture = HTML_SHOT
    target = out / f"{name}.png"
    with tempfile.TemporaryDirectory(prefix="dynscope-screenshot-") as scratch:
        page = Path(scratch) / "report.html"
        # Named relative to the checkout, so the report shows the same path wherever it is.
        path = (captures or newest_captures()) / f"{capture}.dynscope"
        before = os.getcwd()
        os.chdir(REPO)  # (contextlib.chdir is Python 3.11+)
        try:
            write_report([str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)], str(page), fmt="html")
        finally:
            os.chdir(before)
        flags = [f for f in _FLAGS if not f.startswith("--window-size=")]
        subprocess.run([chromium, *flags, f"--user-data-dir={scratch}/profile", f"--window-size={PAGE_SIZE[0]},{PAGE_SIZE[1]}",
                        "--hide-scrollbars", "--virtual-time-budget=5000", f"--screenshot={target}", page.as_uri()],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    if not target.is_file():
        raise SystemExit(f"make.py: Chromium wrote no {target}")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate docs/screenshots/ from tests/data/captures/.")
    parser.add_argument("--tui-only", action="store_true", help="only the terminal UI's SVGs (no Chromium)")
    parser.add_argument("--out", type=Path, default=OUT, help="where the files go (default: docs/screenshots)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    written = tui_screenshots(args.out)
    if not args.tui_only:
        written.append(html_screenshot(args.out))
    for path in written:
        print(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
