"""Compiles one graph, then waits until a file appears (so a test can start a second run
writing the same capture meanwhile), then compiles again and exits with status 3."""

import os
import sys
import time

import torch


@torch.compile(backend="eager")
def f(x):
    return x * 2 + 1


f(torch.ones(4))
gate = sys.argv[1]
deadline = time.monotonic() + 120
while not os.path.exists(gate) and time.monotonic() < deadline:
    time.sleep(0.05)
f(torch.ones(8, 2))
print("done")
sys.exit(3)
