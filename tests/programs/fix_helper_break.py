"""A data-dependent branch inside a helper the compiled function calls: dynscope fix's
torch.compiler.disable remedy wraps the helper inside the run (tests/integration/test_fix.py)."""

import torch


def helper(y):
    if y.sum() > 0:  # data-dependent branching: a graph break inside the helper
        return y * 2
    return y - 1


def f(x):
    return torch.cos(helper(torch.sin(x))) + 1


g = torch.compile(f, backend="eager")
for _ in range(2):
    print(round(float(g(torch.ones(4)).sum()), 4))
