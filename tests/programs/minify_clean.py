"""A program whose compiled code works: `dynscope minify` must say it found no failure.

With --fail it raises afterwards, outside compiled code: not a torch.compile failure either.
"""

import sys

import torch


def f(x):
    return torch.sin(x) * 2 + 1


out = torch.compile(f, backend="eager")(torch.ones(4))
print(out.sum().item())
if "--fail" in sys.argv:
    raise ValueError("the program's own bug, after compiling")
