"""A program that prints its own time (a line that differs between two plain runs) and, inside the
compiled function, a stable line (a print break): a remedy that silences the stable line must fail
however the time line moves, and the change to make is the public setting, not a private torch module
(tests/integration/test_fix_stdout.py)."""

import time

import torch


def forward(x):
    y = torch.relu(x) + 1
    print("normalized")  # a graph break; printed on every call, alike in every run
    return y * 2


compiled = torch.compile(forward, backend="eager")
started = time.perf_counter_ns()
for _ in range(3):
    compiled(torch.arange(4.0))
print(f"took {time.perf_counter_ns() - started} ns")  # never the same twice
