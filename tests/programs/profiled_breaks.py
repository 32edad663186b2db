"""Known costs for `explain --profile` (tests/integration/test_runtime_profile.py).

Net.forward breaks twice: at `time.sleep(0.03)` (30 ms of eager code between the graph before
it and its resume graph, every call) and at `torch._dynamo.graph_break()` (no eager work at
all). `scale` is recompiled once for a new Python int and that version serves most calls.
Prints what the sleeps really took on this machine, timed the same way outside compiled code.
"""

import json
import sys
import time

import torch

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 10


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        y = self.lin(x).relu()
        time.sleep(0.03)
        z = (y * 2).sin()
        torch._dynamo.graph_break()
        return (z + 1).sum()


def scale(x, k):
    return x * k + 1


torch.manual_seed(0)
net = torch.compile(Net(), backend="eager")
scaled = torch.compile(scale, backend="eager", dynamic=False)
x = torch.randn(8, 16)
for _ in range(CALLS):
    net(x)
scaled(x, 2)
for _ in range(CALLS - 1):
    scaled(x, 3)

slept = 0.0
for _ in range(CALLS):
    start = time.perf_counter()
    time.sleep(0.03)
    slept += time.perf_counter() - start
print(json.dumps({"calls": CALLS, "sleep_s": slept}))
