"""One program of the generated bench: a model built from its name alone (build.py), compiled, then per call a
forward at two sizes (eval, no grad) and a training step (train mode, forward and backward), as GraphMend measures.

    python bench/generated/program.py transformers:BertModel [--backend eager] [--calls 3]

Prints one line per step of the last call (a checksum of its outputs), which is what fix compares.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable

import numpy as np
import torch
from build import Built, Unbuildable, build


def checksum(value: object) -> float:
    """Sum of the mean absolute values of every floating tensor in an output (tensors, tuples, dicts, ModelOutput)."""
    if isinstance(value, torch.Tensor):
        return value.detach().float().abs().mean().item() if value.is_floating_point() and value.numel() else 0.0
    if isinstance(value, dict):
        return sum(checksum(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(checksum(v) for v in value)
    return 0.0


def loss_of(value: object) -> torch.Tensor | None:
    """A scalar to train on: the mean square of every floating output that needs a gradient."""
    if isinstance(value, torch.Tensor):
        return value.float().pow(2).mean() if value.is_floating_point() and value.requires_grad else None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    losses = [loss for loss in map(loss_of, items) if loss is not None]
    return torch.stack(losses).sum() if losses else None


def one_call(model: Callable[..., object], built: Built) -> list[str]:
    """Forwards at both sizes in eval mode without gradients, then a training step (batch 2: batch norm needs more
    than one value per channel); one line per step."""
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    built.model.eval()
    with torch.no_grad():
        lines = [f"eval@{size}: {checksum(model(**built.inputs(size))):.6g}" for size in (0, 1)]
    built.model.train()
    loss = loss_of(model(**built.inputs(1)))
    if loss is not None:
        loss.backward()
        built.model.zero_grad(set_to_none=True)
    lines.append(f"train: {float('nan') if loss is None else loss.item():.6g}")
    return lines


def run(spec: str, backend: str, calls: int) -> list[str]:
    built = build(spec)
    compiled = torch.compile(built.model, backend=backend)
    lines: list[str] = []
    for _ in range(calls):
        lines = one_call(compiled, built)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", help="library:Class, e.g. transformers:BertModel")
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    try:
        lines = run(args.spec, args.backend, args.calls)
    except Unbuildable as exc:
        sys.exit(f"{args.spec}: cannot be built: {exc}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
