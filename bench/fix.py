"""What `dynscope fix` costs: its whole wall time against one plain run of the same program.

For each program: one plain `python SCRIPT` run and one `dynscope fix SCRIPT` run (the baseline,
every trial and the combined run), side by side, `--rounds` times, medians compared. The issue's
goal: fix ≤ (1 + trials ÷ 2) × one plain run on 2 cores, where trials are the runs after the
baseline (the remedies, and the combined run).

    python bench/fix.py [--rounds 1] [--backend eager] [--jobs N] [--programs examples/graph_breaks.py,...]

`--trial-caches` compares instead, side by side, `dynscope fix` as it runs now (the baseline and
the trials share one private cache directory with the compile caches on: a trial loads the graphs
it left unchanged) with every run's caches off, as fix ran before (DYNSCOPE_FIX_COLD_TRIALS=1):
whole wall time and CPU time (user + system of every process) of each, medians of --rounds, the
order alternating by round. Use an Inductor backend for it (eager compiles nothing to cache):

    python bench/fix.py --trial-caches --backend inductor --programs examples/graph_breaks.py,examples/recompiles.py
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def fix_with_trial_caches(script: str, args: argparse.Namespace, cold: bool) -> tuple[float, float, int]:
    """(wall s, CPU s, runs) of one `dynscope fix`, its trials sharing the caches or (``cold``) not."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DYNSCOPE_TEST_", "TORCHINDUCTOR_FORCE"))}
    if cold:
        env["DYNSCOPE_FIX_COLD_TRIALS"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dynscope", "fix", "--jobs", str(args.jobs), "-o", "fix.json", script,
                        "--backend", args.backend], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       cwd=tmp, env=env)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        runs = json.loads(Path(tmp, "fix.json").read_text())["runs"]
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, runs


def compare_trial_caches(args: argparse.Namespace) -> None:
    print(f"{'program':32} {'runs':>4} {'shared s':>9} {'cold s':>8} {'ratio':>6} {'shared cpu':>11} {'cold cpu':>9} "
          f"{'ratio':>6}")
    for program in args.programs.split(","):
        script = str(REPO / program)
        shared: list[tuple[float, float, int]] = []
        cold: list[tuple[float, float, int]] = []
        for round_ in range(args.rounds):
            for is_cold in ((False, True) if round_ % 2 == 0 else (True, False)):
                (cold if is_cold else shared).append(fix_with_trial_caches(script, args, is_cold))
        sw, cw = statistics.median(r[0] for r in shared), statistics.median(r[0] for r in cold)
        sc, cc = statistics.median(r[1] for r in shared), statistics.median(r[1] for r in cold)
        runs = "/".join(sorted({str(r[2]) for r in shared + cold}))
        print(f"{program:32} {runs:>4} {sw:9.1f} {cw:8.1f} {sw / cw:6.2f} {sc:11.1f} {cc:9.1f} {sc / cc:6.2f}",
              flush=True)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--trial-caches", action="store_true",
                        help="compare fix with its runs sharing the compile caches against every run cold")
    args = parser.parse_args()
    if args.trial_caches:
        compare_trial_caches(args)
        return
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
