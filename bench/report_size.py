"""How big the reports are and how long they take: a small example's capture and a large one.

The large capture is made by bench/make_large_capture.py (1,000 compiles, ~100 MB). Each report
is generated in a fresh process, as `dynscope report` runs, and timed whole.

    python bench/report_size.py [--compiles 1000] [--target-mb 100]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from make_large_capture import make_large_capture, template_captures  # noqa: E402


def timed_report(capture: Path, output: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dynscope", "report", str(capture), "-o", str(output)],
                   check=True, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compiles", type=int, default=1000)
    parser.add_argument("--target-mb", type=float, default=100.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = template_captures()[0]  # examples/graph_breaks.py compiled with inductor
        large = Path(tmp) / "large.dynscope"
        make_large_capture(str(large), compiles=args.compiles, target_mb=args.target_mb)
        print(f"{'capture':34s} {'capture MB':>10s} {'format':>6s} {'report MB':>9s} {'seconds':>8s}")
        for label, capture in (("small (graph_breaks.py, inductor)", small),
                               (f"large ({args.compiles} compiles)", large)):
            for fmt in ("html", "md", "json"):
                output = Path(tmp) / f"report.{fmt}"
                seconds = timed_report(capture, output)
                print(f"{label:34s} {os.path.getsize(capture) / 1e6:10.1f} {fmt:>6s} "
                      f"{os.path.getsize(output) / 1e6:9.2f} {seconds:8.2f}")


if __name__ == "__main__":
    main()
