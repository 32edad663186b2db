"""What `dynscope explain` costs with the compile caches as the user has them: plain cold, plain
warm, `explain` cold and `explain` warm, side by side in one run (issue 42: explain ≤ 1.05× the
plain run in the same cache state).

For each program and round: two fresh cache directories (Inductor's and Triton's), one for the
plain runs and one for explain's. Cold: `python SCRIPT` on the first, `dynscope explain SCRIPT` on
the second (both empty: every graph and kernel compiled). Warm: the same two commands again on
the directories they filled (both hit). The order of plain and explain alternates each round.
Ratios compare medians of whole-process wall time and of CPU time (user + system of every
process of the run: on a shared, loaded machine it moves far less with the load than the wall
time does). `--cold-explain` adds `dynscope explain --cold` (every stage recorded, caches off in
a private directory) against the plain cold run, for reference.

    python bench/caches.py [--rounds 3] [--programs examples/graph_breaks.py,examples/conv_net.py,...]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The README's first command explains examples/graph_breaks.py; two more Inductor programs.
PROGRAMS = ("examples/graph_breaks.py", "examples/conv_net.py", "examples/train_loop.py")


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the run's processes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def user_env(cache: Path) -> dict[str, str]:
    """The environment a user runs with, its caches in ``cache`` (no test-suite setting)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DYNSCOPE_TEST_", "TORCHINDUCTOR_", "TRITON_"))}
    return {**env, "TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--cold-explain", action="store_true", help="also `explain --cold` against plain cold")
    args = parser.parse_args()
    programs = [(REPO / p).resolve() for p in args.programs.split(",") if p]
    wall: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}

    def record(program: Path, mode: str, cmd: list[str], env: dict[str, str], scratch: Path) -> None:
        w, c = timed(cmd, env, scratch)
        wall.setdefault((program.name, mode), []).append(w)
        cpu.setdefault((program.name, mode), []).append(c)
        print(f"{program.name:16s} {mode:15s} {w:7.2f} s wall {c:7.2f} s cpu", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="bench-caches-") as tmp:
        scratch = Path(tmp)
        for round_ in range(args.rounds):
            for program in programs:
                caches = {side: scratch / f"{program.stem}-{round_}-{side}" for side in ("plain", "explain", "cold")}
                commands = {
                    "plain": [sys.executable, str(program)],
                    "explain": [sys.executable, "-m", "dynscope", "explain", "-q", "-o",
                                str(scratch / "run.dynscope"), str(program)],
                }
                sides = ("plain", "explain") if round_ % 2 == 0 else ("explain", "plain")
                for state in ("cold", "warm"):
                    for side in sides:
                        record(program, f"{side} {state}", commands[side], user_env(caches[side]), scratch)
                if args.cold_explain:
                    cmd = [sys.executable, "-m", "dynscope", "explain", "--cold", "-q", "-o",
                           str(scratch / "run.dynscope"), str(program)]
                    record(program, "explain --cold", cmd, user_env(caches["cold"]), scratch)

    print(f"\nmedian of {args.rounds} per run; ratio: explain / plain in the same cache state (wall, and CPU of "
          "every process of the run)")
    print(f"{'program':16s} {'state':6s} {'plain s':>8s} {'explain s':>10s} {'wall ratio':>10s} "
          f"{'plain cpu':>10s} {'explain cpu':>12s} {'cpu ratio':>10s}")
    pairs = [("cold", "plain cold", "explain cold"), ("warm", "plain warm", "explain warm")]
    if args.cold_explain:
        pairs.append(("--cold", "plain cold", "explain --cold"))
    for program in programs:
        for state, plain, ours in pairs:
            pw, ow = statistics.median(wall[(program.name, plain)]), statistics.median(wall[(program.name, ours)])
            pc, oc = statistics.median(cpu[(program.name, plain)]), statistics.median(cpu[(program.name, ours)])
            print(f"{program.name:16s} {state:6s} {pw:8.2f} {ow:10.2f} {ow / pw:10.3f} {pc:10.2f} {oc:12.2f} {oc / pc:10.3f}")
    print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
