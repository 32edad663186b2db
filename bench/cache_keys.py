"""What recording the compile caches' key details costs: compile time with it on vs off.

With caches kept (``explain --keep-caches`` / ``--warm``), dynscope has AOTAutograd log its
cache key's components (torch computes them only while its logger is at DEBUG; Inductor's fx
graph cache logs them always) and records every cache artifact. Each measurement is one fresh
process with a fresh, empty cache directory (a cold compile: every layer misses and logs its
key) recording with ``Recorder(keep_caches=True, cache_keys=on/off)``; it times the first call
of a torch.compile'd function (the compile). The two modes alternate (the order flips each
round) and the medians are compared. Ratios, not absolute times: these machines are noisy.

On a loaded machine the wall times of whole compiles vary far more than 2%, so each "on"
measurement also times, inside the compile, the one thing the switch adds: AOTAutograd computing
its key's component lines (CPU seconds, against the compile's CPU seconds): that share is the
direct measure, the medians' ratio the end-to-end one.

    python bench/cache_keys.py [--rounds 5] [--backend inductor]
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


def child(mode: str, backend: str, scratch: str) -> None:
    """One measurement: a cold compile under the recorder; prints its seconds."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "cache")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "cache", "triton")
    import torch

    from dynscope.recorder import Recorder

    def layer(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x @ w) * 0.5 + x.sum()

    x, w = torch.randn(16, 32, requires_grad=True), torch.randn(32, 32)
    key_lines_cpu = _time_aot_key_lines()
    recorder = Recorder(os.path.join(scratch, "run.dynscope"), keep_caches=True, cache_keys=mode == "on").start()
    try:
        compiled = torch.compile(layer, backend=backend)
        started, started_cpu = time.perf_counter(), time.process_time()
        compiled(x, w).sum().backward()  # forward and backward: both compile, both look up the caches
        print(time.perf_counter() - started, time.process_time() - started_cpu, sum(key_lines_cpu))
    finally:
        recorder.stop(exit_code=0)


def _time_aot_key_lines() -> list[float]:
    """CPU seconds AOTAutograd spends computing its key's component lines (a bench-only wrap of
    torch's private helper; an empty list where this torch has none)."""
    spent: list[float] = []
    try:
        from torch._functorch._aot_autograd import autograd_cache
    except ImportError:
        return spent
    helper = getattr(autograd_cache, "_get_debug_lines_for_cache_key", None)
    if helper is None:
        return spent

    def timed(*args, **kwargs):
        started = time.process_time()
        try:
            return helper(*args, **kwargs)
        finally:
            spent.append(time.process_time() - started)

    autograd_cache._get_debug_lines_for_cache_key = timed
    return spent


def measure(mode: str, backend: str) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, CPU seconds computing AOTAutograd's key lines) of one cold compile."""
    with tempfile.TemporaryDirectory(prefix="dynscope-bench-") as scratch:
        out = subprocess.run([sys.executable, __file__, "--child", mode, "--backend", backend, "--scratch", scratch],
                             check=True, capture_output=True, text=True, cwd=REPO)
    wall, cpu, key_lines = (float(v) for v in out.stdout.strip().splitlines()[-1].split())
    return wall, cpu, key_lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--child", choices=("on", "off"), help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.backend, args.scratch)
        return
    measure("off", args.backend)  # unmeasured: warms the OS file cache and the C++ toolchain
    times: dict[str, list[tuple[float, float, float]]] = {"on": [], "off": []}
    for round_ in range(args.rounds):
        for mode in (("on", "off") if round_ % 2 == 0 else ("off", "on")):
            times[mode].append(measure(mode, args.backend))
            wall, cpu, key_lines = times[mode][-1]
            print(f"round {round_ + 1} {mode:>3}: {wall:.3f} s wall, {cpu:.3f} s CPU, "
                  f"{key_lines * 1e3:.1f} ms computing AOTAutograd's key lines", file=sys.stderr)
    for what, i in (("wall", 0), ("CPU", 1)):
        on, off = statistics.median(t[i] for t in times["on"]), statistics.median(t[i] for t in times["off"])
        print(f"compile time ({what}), median of {args.rounds} ({args.backend}, cold caches): key details recorded "
              f"{on:.3f} s, not recorded {off:.3f} s, ratio {on / off:.3f} ({on / off - 1:+.1%})")
    share = statistics.median(t[2] / t[1] for t in times["on"])
    print(f"AOTAutograd's key lines (what the switch adds), median share of the compile's CPU time: {share:.2%}")


if __name__ == "__main__":
    main()
