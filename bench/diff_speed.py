"""How long a stage diff takes on a big graph (issue target: 2,000 nodes in under a second).

Compiles a 2,000-op chain with aot_eager under dynscope.capture(), then times, on the real
capture: dynamo -> aot_inference (lineage matching + text diff) and a compile-vs-recompile diff.

    python bench/diff_speed.py [--ops 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import dynscope  # noqa: E402
from dynscope.analysis.diff import diff_compiles, diff_stages  # noqa: E402
from dynscope.model import Capture  # noqa: E402


def chain(x: torch.Tensor, ops: int) -> torch.Tensor:
    for i in range(ops // 4):
        x = torch.sin(x) * 1.01 + i
        x = torch.relu(x)
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "big.dynscope")
        compiled = torch.compile(lambda x: chain(x, args.ops), backend="aot_eager")
        with dynscope.capture(path):
            compiled(torch.ones(8))
            compiled(torch.ones(16))  # a recompile (shape), for the compile diff
        capture = Capture.open(path)
        first = capture.compiles()[0].compile_id
        dynamo, aot = capture.stage(first, "dynamo"), capture.stage(first, "aot_inference")
        nodes = (len(capture.fx_graph(dynamo)), len(capture.fx_graph(aot)))

        def timed(fn) -> float:
            samples = []
            for _ in range(args.repeat):
                fresh = Capture.open(path)  # nothing cached from the previous round
                started = time.perf_counter()
                fn(fresh)
                samples.append(time.perf_counter() - started)
            return statistics.median(samples)

        stage_s = timed(lambda c: diff_stages(c, c.stage(first, "dynamo"), c.stage(first, "aot_inference")))
        compile_s = timed(lambda c: diff_compiles(c, first, c.compiles()[1].compile_id))
        result = diff_stages(capture, dynamo, aot)
    print(f"graph sizes: dynamo {nodes[0]} nodes, aot_inference {nodes[1]} nodes")
    print(f"diff dynamo -> aot_inference: {stage_s:.3f} s median of {args.repeat} "
          f"({len(result.decomposed)} nodes matched by {result.matched_by}, {len(result.text_diff)} diff lines)")
    print(f"diff compile 0 -> recompile:  {compile_s:.3f} s median of {args.repeat}")


if __name__ == "__main__":
    main()
