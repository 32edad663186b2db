"""A helper that takes a lock around its tensor work (the weights are shared with a loader thread):
Dynamo cannot enter the lock, and no specific rewrite answers that. dynscope fix's escape hatches
(nonstrict_trace, leaf_function) keep the helper in the graph as one opaque call; torch.compiler.disable
only moves it to eager (tests/integration/test_fix_hatches.py)."""

import threading

import torch

_LOCK = threading.Lock()


def scaled(x, w):
    with _LOCK:
        return x * w + 1


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        return scaled(torch.relu(self.proj(x)), 0.5).sum(dim=-1)


torch.manual_seed(0)
compiled = torch.compile(Net(), backend="eager")
with torch.no_grad():
    for _ in range(2):
        print(round(float(compiled(torch.randn(4, 8)).sum()), 4))
