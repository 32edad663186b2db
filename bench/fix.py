"""What `dynscope fix` costs: its whole wall time against one plain run of the same program.

For each program: one plain `python SCRIPT` run and one `dynscope fix SCRIPT` run (the baseline,
every trial and the combined run), side by side, `--rounds` times, medians compared. The issue's
goal: fix ≤ (1 + trials ÷ 2) × one plain run on 2 cores, where trials are the runs after the
baseline (the remedies, and the combined run).

    python bench/fix.py [--rounds 1] [--backend eager] [--jobs N] [--programs examples/graph_breaks.py,...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = ("tests/programs/fix_model.py", "examples/graph_breaks.py", "examples/recompiles.py",
            "examples/source_breaks.py")


def timed(cmd: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd,
                   env={**os.environ, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    args = parser.parse_args()
    print(f"{'program':32} {'plain s':>8} {'fix s':>8} {'trials':>6} {'ratio':>6} {'goal':>6}  verdicts")
    for program in args.programs.split(","):
        script = str(REPO / program)
        plain, fix, trials, verdicts = [], [], 0, ""
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                plain.append(timed([sys.executable, script, "--backend", args.backend], tmp))
                fix.append(timed([sys.executable, "-m", "dynscope", "fix", "--jobs", str(args.jobs), "-o", "fix.json",
                                  script, "--backend", args.backend], tmp))
                doc = json.loads(Path(tmp, "fix.json").read_text())
                trials = doc["runs"] - 1
                verdicts = " ".join(sorted({t["verdict"] for t in doc["trials"]}))
        p, f = statistics.median(plain), statistics.median(fix)
        goal = 1 + trials / 2
        print(f"{program:32} {p:8.1f} {f:8.1f} {trials:6d} {f / p:6.2f} {goal:6.2f}  {verdicts}", flush=True)


if __name__ == "__main__":
    main()
