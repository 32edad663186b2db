"""What `dynscope explain` costs: each example run plainly, under dynscope, under
`dynscope explain --profile` and under TORCH_TRACE.

The modes run alternating (the order rotates each round) with the same cache settings
(compile caches off in all of them, as dynscope runs by default), and the median wall time of
each whole process is compared. Ratios, not absolute times: these machines are noisy. The CPU
time of each run's processes (user + system, the program's and dynscope's together) is compared
too: on a shared, loaded machine it moves far less with the load than the wall time does.

    python bench/overhead.py [--rounds 3] [--backend inductor] [--examples graph_breaks.py,...]
                             [--modes plain,dynscope] [--script bench/hf_models/ibert.py]
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
EXAMPLES = ("graph_breaks.py", "recompiles.py", "train_loop.py", "conv_net.py")
MODES = ("plain", "dynscope", "profile", "torch_trace")


def command(mode: str, script: Path, backend: str, scratch: Path) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
    args = [str(script), "--backend", backend]
    if mode in ("dynscope", "profile"):
        profile = ["--profile"] if mode == "profile" else []
        return [sys.executable, "-m", "dynscope", "explain", *profile, "-o", str(scratch / "run.dynscope"), *args], env
    if mode == "torch_trace":
        env["TORCH_TRACE"] = str(scratch / "trace")
    return [sys.executable, *args], env


def timed(cmd: list[str], env: dict[str, str], cpu: list[float] | None = None) -> float:
    """Wall seconds of the run; its processes' CPU seconds appended to ``cpu``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    parser.add_argument("--modes", default=",".join(MODES), help="plain first; e.g. plain,dynscope")
    parser.add_argument("--script", action="append", default=[],
                        help="also a script outside examples/ (taking --backend), e.g. bench/hf_models/<model>.py")
    args = parser.parse_args()
    modes = tuple(args.modes.split(","))
    scripts = [REPO / "examples" / e for e in args.examples.split(",") if e] + [Path(s).resolve() for s in args.script]
    examples = [s.name for s in scripts]
    by_name = dict(zip(examples, scripts))
    times: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for example in examples:  # one unmeasured run warms the OS file cache and C++ toolchain
            timed(*command("plain", by_name[example], args.backend, scratch))
        for round_ in range(args.rounds):
            for example in examples:
                order = modes[round_ % len(modes):] + modes[: round_ % len(modes)]
                for mode in order:
                    cmd, env = command(mode, by_name[example], args.backend, scratch)
                    times.setdefault((example, mode), []).append(timed(cmd, env, cpu.setdefault((example, mode), [])))
                    print(f"round {round_ + 1} {example:16s} {mode:11s} {times[(example, mode)][-1]:7.2f} s "
                          f"(cpu {cpu[(example, mode)][-1]:7.2f} s)", file=sys.stderr)
    if modes != MODES:
        _short_table(examples, modes, times, cpu, args)
        return

    print(f"\nwall time per run, median of {args.rounds} (backend={args.backend}, compile caches off in every mode)")
    print(f"{'example':16s} {'plain s':>8s} {'dynscope s':>11s} {'ratio':>6s} {'--profile s':>12s} {'ratio':>6s} "
          f"{'TORCH_TRACE s':>14s} {'ratio':>6s}")
    ratios: dict[str, list[float]] = {mode: [] for mode in MODES[1:]}
    for example in examples:
        plain = statistics.median(times[(example, "plain")])
        row = f"{example:16s} {plain:8.2f}"
        for mode, width in (("dynscope", 11), ("profile", 12), ("torch_trace", 14)):
            seconds = statistics.median(times[(example, mode)])
            ratios[mode].append(seconds / plain)
            row += f" {seconds:{width}.2f} {seconds / plain:6.3f}"
        print(row)
    print(f"{'median ratio':16s} {'':8s} {'':11s} {statistics.median(ratios['dynscope']):6.3f} {'':12s} "
          f"{statistics.median(ratios['profile']):6.3f} {'':14s} {statistics.median(ratios['torch_trace']):6.3f}")


def _short_table(examples: list[str], modes: tuple[str, ...], times: dict[tuple[str, str], list[float]],
                 cpu: dict[tuple[str, str], list[float]], args: argparse.Namespace) -> None:
    print(f"\nmedian of {args.rounds} per run (backend={args.backend}, compile caches off in every mode); "
          "ratio = mode / plain, wall and CPU (user+system of every process of the run)")
    print(f"{'example':22s} " + " ".join(f"{m + ' wall':>15s} {'ratio':>6s} {m + ' cpu':>14s} {'ratio':>6s}" for m in modes))
    ratios: dict[tuple[str, str], list[float]] = {}
    for example in examples:
        wall0, cpu0 = statistics.median(times[(example, "plain")]), statistics.median(cpu[(example, "plain")])
        row = f"{example:22s}"
        for mode in modes:
            w, c = statistics.median(times[(example, mode)]), statistics.median(cpu[(example, mode)])
            ratios.setdefault((mode, "wall"), []).append(w / wall0)
            ratios.setdefault((mode, "cpu"), []).append(c / cpu0)
            row += f" {w:15.2f} {w / wall0:6.3f} {c:14.2f} {c / cpu0:6.3f}"
        print(row)
    print(f"{'median ratio':22s}" + "".join(f" {'':15s} {statistics.median(ratios[(m, 'wall')]):6.3f} {'':14s} "
                                            f"{statistics.median(ratios[(m, 'cpu')]):6.3f}" for m in modes))


if __name__ == "__main__":
    main()
