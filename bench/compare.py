"""How long `dynscope compare` takes on two large captures (1,000 compiles each, different seeds),
side by side with `dynscope summary --json` of one of them, each in a fresh process.

    python bench/compare.py [--compiles 1000] [--target-mb 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from make_large_capture import make_large_capture  # noqa: E402


def timed(*args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dynscope", *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compiles", type=int, default=1000)
    parser.add_argument("--target-mb", type=float, default=100.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.dynscope", Path(tmp) / "b.dynscope"
        make_large_capture(str(a), compiles=args.compiles, target_mb=args.target_mb, seed=0)
        make_large_capture(str(b), compiles=args.compiles, target_mb=args.target_mb, seed=1)
        rows = {
            "compare (text)": ("compare", str(a), str(b)),
            "compare --json": ("compare", str(a), str(b), "--json"),
            "summary --json (one capture)": ("summary", str(a), "--json"),
        }
        medians = {}
        for label, command in rows.items():
            times = [timed(*command) for _ in range(args.repeat)]
            medians[label] = statistics.median(times)
        base = medians["summary --json (one capture)"]
        print(f"{'command':30s} {'median s':>9s} {'÷ summary':>10s}   ({args.compiles} compiles each)")
        for label, seconds in medians.items():
            print(f"{label:30s} {seconds:9.2f} {seconds / base:10.2f}")


if __name__ == "__main__":
    main()
