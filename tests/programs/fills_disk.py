"""Compiles many small distinct functions, so a capture outgrows a small filesystem, then
prints and exits with status 5: the status dynscope must pass on."""

import sys

import torch

for i in range(40):
    fn = eval(f"lambda x: (x + {i}).sin() * {i + 1}")  # a new code object each time
    torch.compile(fn, backend="eager")(torch.ones(i + 1))
print("program finished")
sys.exit(5)
