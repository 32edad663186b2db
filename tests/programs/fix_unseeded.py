"""A program whose outputs differ from run to run (it re-seeds from the clock, as Reformer's
training calls torch.seed()), with one .item() break that capture_scalar_outputs removes: fix must
tell the noise from the remedy (tests/integration/test_fix.py)."""

import torch


def step(x, noise):
    scale = x.sum().item()  # a graph break unless capture_scalar_outputs
    return x * scale, noise * 2


compiled = torch.compile(step, backend="eager")
x = torch.arange(4.0)
for _ in range(3):
    torch.seed()  # seeded from the clock: noise differs between two plain runs
    compiled(x, torch.randn(4))
print("done")
