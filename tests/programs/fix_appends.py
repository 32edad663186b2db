"""dynscope fix: a program with one graph break that appends to a file in its working directory and prints
how many lines that file has: every fix run must see the directory as it was
(tests/integration/test_security_fix.py)."""

import torch


def f(x):
    y = torch.sin(x)
    scale = y.sum().item()  # graph break: Tensor.item()
    return y * scale


g = torch.compile(f, backend="eager")
print(round(float(g(torch.ones(4)).sum()), 4))
with open("runs.log", "a") as log:
    log.write("ran\n")
with open("runs.log") as log:
    print("runs so far:", len(log.readlines()))
