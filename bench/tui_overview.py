"""Time to the TUI's overview, and key-press latency, on a large capture.

    python bench/tui_overview.py [--compiles 1000] [--target-mb 100] [--capture PATH] [--runs 3]

The capture (1,000 compiles, ~100 MB of payloads by default) is made once with
bench/make_large_capture.py and cached. Then:

1. end to end: `dynscope tui CAPTURE` starts in a pseudo-terminal (120x40); the figure is the
   time from starting the process until the overview's "Top problems" is on the terminal
   (Python start-up and imports included);
2. in process: how that splits into opening the capture and reading the overview's records,
   and the app's first paint (headless, same size);
3. key latency: from a key press until the screen has settled (workers finished, repainted),
   for each key in a walk through the views, both first visits (a view is built the first
   time it is shown) and repeat ones.

Nothing is asserted: the figures are printed, measured in this run.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import select
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from make_large_capture import CACHE, make_large_capture  # noqa: E402

SIZE = (120, 40)
OVERVIEW_MARKER = b"Top problems"
# (what the user does, keys). Each step is timed from its first key to the settled screen.
WALK = (
    ("compiles view, first visit", ["2"]),
    ("↓ in the compile tree (stepper follows)", ["down"]),
    ("n: next stage", ["n"]),
    ("n: next stage", ["n"]),
    ("d: diff from the previous stage", ["d"]),
    ("d: back to the stage", ["d"]),
    ("graph breaks view, first visit", ["3"]),
    ("↓ in the break list", ["down"]),
    ("recompiles view, first visit", ["4"]),
    ("↓ in the compile table", ["down"]),
    ("kernels view, first visit", ["5"]),
    ("↓ in the kernel tree", ["down"]),
    ("overview again", ["1"]),
    ("compiles view again", ["2"]),
)
# A common term (matches FX nodes and kernels in most compiles: the list stops at its cap) and
# a rare one (so every compile is searched).
SEARCHES = ("gelu", "mm_default")


def large_capture(compiles: int, target_mb: float) -> Path:
    path = CACHE / f"large-{compiles}-{target_mb:g}mb.dynscope"
    if not path.exists():
        print(f"making {path} (once; compiling the templates takes a few minutes)…", flush=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        make_large_capture(str(partial), compiles=compiles, target_mb=target_mb)
        partial.rename(path)
    return path


def end_to_end(capture: Path, timeout: float = 60.0) -> float:
    """Seconds from starting `dynscope tui` in a terminal until the overview is drawn."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(SIZE[0]), "LINES": str(SIZE[1])}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "dynscope", "tui", str(capture)], stdin=slave, stdout=slave,
                               stderr=slave, env=env, close_fds=True)
    os.close(slave)
    seen = b""
    try:
        while time.perf_counter() - started < timeout:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    seen += os.read(master, 1 << 16)
                except OSError:
                    break
                if OVERVIEW_MARKER in seen:
                    return time.perf_counter() - started
            if process.poll() is not None:
                break
        raise RuntimeError(f"the overview never appeared; the terminal showed: {seen[-2000:]!r}")
    finally:
        try:
            os.write(master, b"q")
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
        os.close(master)


async def in_process(capture: Path) -> tuple[dict[str, float], list[tuple[str, float]]]:
    from dynscope.model import Capture
    from dynscope.tui.app import DynscopeApp

    phases: dict[str, float] = {}
    started = time.perf_counter()
    model = Capture.open(str(capture))
    app = DynscopeApp(model)  # reads the overview's records
    phases["open the capture and read the overview's records"] = time.perf_counter() - started
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        phases["first paint of the overview (headless)"] = time.perf_counter() - started - sum(phases.values())
        phases["total, open to overview"] = time.perf_counter() - started
        latencies = []
        for label, keys in WALK:
            began = time.perf_counter()
            await pilot.press(*keys)
            await settle(app, pilot)
            latencies.append((label, time.perf_counter() - began))
        latencies += await search(app, pilot)
    model.close()
    return phases, latencies


async def search(app, pilot) -> list[tuple[str, float]]:
    """A search runs in the background: time its first results, and its end."""
    timings = []
    for query in SEARCHES:
        await pilot.press("slash")
        await settle(app, pilot)
        began = time.perf_counter()
        await pilot.press(*query)
        screen = app.screen
        first = None
        while not screen.done:
            if first is None and screen.hits:
                first = time.perf_counter() - began
            await pilot.pause(0.01)
        done = time.perf_counter() - began
        label = f"search {query!r} ({len(screen.hits)} results)"
        if first is not None:
            timings.append((f"{label}: typing to first results", first))
        timings.append((f"{label}: typing to search finished", done))
        await pilot.press("escape")
        await settle(app, pilot)
    return timings


async def settle(app, pilot) -> None:
    """Until no worker runs and the messages they posted are handled."""
    while True:
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.is_running for w in app.workers):
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compiles", type=int, default=1000)
    parser.add_argument("--target-mb", type=float, default=100.0)
    parser.add_argument("--capture", type=Path, help="use this capture instead of making one")
    parser.add_argument("--runs", type=int, default=3, help="end-to-end runs (the median is reported)")
    args = parser.parse_args()
    capture = args.capture or large_capture(args.compiles, args.target_mb)

    from dynscope.model import Capture

    with Capture.open(str(capture)) as model:
        print(f"capture: {capture} ({os.path.getsize(capture) / 1e6:.0f} MB, {len(model.compiles())} compiles)")

    runs = [end_to_end(capture) for _ in range(args.runs)]
    print(f"\ntime to overview, end to end (`dynscope tui` in a {SIZE[0]}x{SIZE[1]} terminal, process start "
          f"to overview drawn): median {statistics.median(runs):.2f} s over {len(runs)} runs "
          f"({', '.join(f'{r:.2f}' for r in runs)})")

    phases, latencies = asyncio.run(in_process(capture))
    print("\nin process:")
    for label, seconds in phases.items():
        print(f"  {seconds * 1000:7.0f} ms  {label}")
    print("\nkey latency (key press to settled screen):")
    for label, seconds in latencies:
        print(f"  {seconds * 1000:7.0f} ms  {label}")
    repeat = [s for label, s in latencies if "first visit" not in label and "search" not in label]
    print(f"\n  median of the other keys: {statistics.median(repeat) * 1000:.0f} ms; "
          f"slowest first visit of a view: {max(s for label, s in latencies if 'first visit' in label) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
