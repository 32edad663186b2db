"""What `clone-repeated-input` costs per call, and where the cost is: an `autograd.Function` given one tensor twice.

Three versions of one small training step (linear → the Function → linear → backward), each under
``torch.compile(backend=...)``, timed side by side in one process, the order alternating within each round:
- ``as written``: ``apply(h, m, m)``: Dynamo refuses the duplicate input, the Function runs outside the graph;
- ``cloned``: the rewrite, ``apply(h, m, m.clone())``: the Function traced into the graph;
- ``distinct``: two tensors computed apart, ``apply(h, m, sigmoid(h + 0))``: traced too, with no clone.

``cloned`` against ``distinct`` is the clone's own cost; ``distinct`` against ``as written`` is what tracing the
Function costs or saves on that backend.

    python bench/repeated_input_cost.py [--rounds 30] [--backends eager,aot_eager,inductor]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch


class GatedProduct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gate, mask):  # type: ignore[no-untyped-def]  # torch's own signature
        ctx.save_for_backward(x, gate, mask)
        return x * gate * mask

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        x, gate, mask = ctx.saved_tensors
        return grad * gate * mask, grad * x * mask, grad * x * gate


def _steps() -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    torch.manual_seed(0)
    first, last = torch.nn.Linear(32, 32), torch.nn.Linear(32, 32)

    def as_written(x: torch.Tensor) -> torch.Tensor:
        h = first(x)
        m = torch.sigmoid(h)
        return last(GatedProduct.apply(h, m, m)).pow(2).mean()

    def cloned(x: torch.Tensor) -> torch.Tensor:
        h = first(x)
        m = torch.sigmoid(h)
        return last(GatedProduct.apply(h, m, m.clone())).pow(2).mean()

    def distinct(x: torch.Tensor) -> torch.Tensor:
        h = first(x)
        return last(GatedProduct.apply(h, torch.sigmoid(h), torch.sigmoid(h + 0))).pow(2).mean()

    return {"as written": as_written, "cloned": cloned, "distinct": distinct}


def _per_call(step: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, calls: int = 20) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        step(x).backward()
    return (time.perf_counter() - start) / calls


def measure(backend: str, rounds: int) -> dict[str, float]:
    """Median seconds per call of each version on ``backend``."""
    torch._dynamo.reset()
    compiled = {name: torch.compile(step, backend=backend) for name, step in _steps().items()}
    x = torch.randn(2, 16, 32)
    for step in compiled.values():  # compile, then warm
        for _ in range(3):
            step(x).backward()
    times: dict[str, list[float]] = {name: [] for name in compiled}
    names = list(compiled)
    for round_number in range(rounds):
        for name in names if round_number % 2 == 0 else reversed(names):
            times[name].append(_per_call(compiled[name], x))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--backends", default="eager,aot_eager,inductor")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for backend in args.backends.split(","):
        medians = measure(backend, args.rounds)
        base = medians["as written"]
        cells = "  ".join(f"{name} {seconds * 1e3:.3f} ms ({seconds / base:.2f})" for name, seconds in medians.items())
        print(f"{backend:10s} {cells}")


if __name__ == "__main__":
    main()
