"""What `dynscope explain` costs: each example run plainly, under dynscope, under
`dynscope explain --profile` and under TORCH_TRACE.

The modes run alternating (the order rotates each round) with the same cache settings
(compile caches off in all of them, as dynscope runs by default), and the median wall time of
each whole process is compared. Ratios, not absolute times: these machines are noisy.

    python bench/overhead.py [--rounds 3] [--backend inductor] [--examples graph_breaks.py,...]
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


def timed(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    args = parser.parse_args()
    examples = args.examples.split(",")
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for example in examples:  # one unmeasured run warms the OS file cache and C++ toolchain
            timed(*command("plain", REPO / "examples" / example, args.backend, scratch))
        for round_ in range(args.rounds):
            for example in examples:
                order = MODES[round_ % len(MODES):] + MODES[: round_ % len(MODES)]
                for mode in order:
                    cmd, env = command(mode, REPO / "examples" / example, args.backend, scratch)
                    times.setdefault((example, mode), []).append(timed(cmd, env))
                    print(f"round {round_ + 1} {example:16s} {mode:11s} {times[(example, mode)][-1]:7.2f} s",
                          file=sys.stderr)

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


if __name__ == "__main__":
    main()
