"""What recording the compile caches' key details costs: compile time with it on vs off.

With caches kept (``explain --keep-caches`` / ``--warm``), dynscope has AOTAutograd log its
cache key's components (torch computes them only while its logger is at DEBUG; Inductor's fx
graph cache logs them always) and records every cache artifact. Each measurement is one fresh
process with a fresh, empty cache directory (a cold compile: every layer misses and logs its
key) recording with ``Recorder(keep_caches=True, cache_keys=on/off)``; it times the first call
of a torch.compile'd function (the compile). The two modes alternate (the order flips each
round) and the medians are compared. Ratios, not absolute times: these machines are noisy.

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
    recorder = Recorder(os.path.join(scratch, "run.dynscope"), keep_caches=True, cache_keys=mode == "on").start()
    try:
        compiled = torch.compile(layer, backend=backend)
        started = time.perf_counter()
        compiled(x, w).sum().backward()  # forward and backward: both compile, both look up the caches
        print(time.perf_counter() - started)
    finally:
        recorder.stop(exit_code=0)


def measure(mode: str, backend: str) -> float:
    with tempfile.TemporaryDirectory(prefix="dynscope-bench-") as scratch:
        out = subprocess.run([sys.executable, __file__, "--child", mode, "--backend", backend, "--scratch", scratch],
                             check=True, capture_output=True, text=True, cwd=REPO)
    return float(out.stdout.strip().splitlines()[-1])


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
    times: dict[str, list[float]] = {"on": [], "off": []}
    for round_ in range(args.rounds):
        for mode in (("on", "off") if round_ % 2 == 0 else ("off", "on")):
            times[mode].append(measure(mode, args.backend))
            print(f"round {round_ + 1} {mode:>3}: {times[mode][-1]:.3f} s", file=sys.stderr)
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    print(f"compile time, median of {args.rounds} ({args.backend}, cold caches): "
          f"key details recorded {on:.3f} s, not recorded {off:.3f} s, ratio {on / off:.3f} "
          f"({(on / off - 1):+.1%})")


if __name__ == "__main__":
    main()
