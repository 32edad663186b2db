"""What `dynscope numerics` costs: the relu-bug example run plainly (`python example.py
--inject-relu-bug`, Inductor, compile caches off as dynscope runs them) and under `dynscope
numerics`, side by side (alternating, the order rotating each round); median wall time of each
whole process, and the ratio (the issue's goal: at most 3x). Ratios, not absolute times: these
machines are noisy.

    python bench/numerics.py [--rounds 3] [--device cpu|cuda] [--train]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "numerics_relu_bug.py"
GOAL = 3.0


def command(mode: str, program: list[str], scratch: Path) -> list[str]:
    if mode == "numerics":
        return [sys.executable, "-m", "dynscope", "numerics", "-o", str(scratch / "run.dynscope"), *program]
    return [sys.executable, *program]


def timed(cmd: list[str], *, expect: int) -> float:
    env = {**os.environ, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO)
    elapsed = time.perf_counter() - started
    if done.returncode != expect:
        sys.exit(f"{' '.join(cmd)} exited {done.returncode}, not {expect}: {done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--train", action="store_true", help="the example's training step (backward checked too)")
    args = parser.parse_args()
    program = [str(EXAMPLE), "--inject-relu-bug", "--device", args.device, *(["--train"] if args.train else [])]
    modes = ("plain", "numerics")
    times: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = modes[r % 2:] + modes[:r % 2]
            for mode in order:
                times[mode].append(timed(command(mode, program, Path(tmp)), expect=1 if mode == "numerics" else 0))
    plain, checked = statistics.median(times["plain"]), statistics.median(times["numerics"])
    ratio = checked / plain
    print(f"{'program':<44} {'plain s':>8} {'numerics s':>11} {'ratio':>6}  goal")
    name = f"{Path(program[0]).name} {' '.join(program[1:])}"[:44]
    print(f"{name:<44} {plain:8.2f} {checked:11.2f} {ratio:6.2f}  <= {GOAL:g}x {'met' if ratio <= GOAL else 'NOT met'}")
    runs = ", ".join(f"{m} " + " ".join(f"{t:.1f}" for t in times[m]) for m in modes)
    print(f"rounds {args.rounds}, each value the median; every run: {runs}")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
