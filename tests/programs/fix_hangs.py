"""dynscope fix: a program with one graph break (Tensor.item()) that hangs, with a child process of
its own, in the runs the tests want stopped: every trial of capture_scalar_outputs (the remedy fix
tries for that break), or every run with --hang-in-baseline (tests/integration/test_security_fix.py)."""

import subprocess
import sys
import time

import torch


def f(x):
    y = torch.sin(x)
    return y * y.sum().item()


g = torch.compile(f, backend="eager")
print(round(float(g(torch.ones(4)).sum()), 4), flush=True)
if "--hang-in-baseline" in sys.argv or torch._dynamo.config.capture_scalar_outputs:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    print("hanging", child.pid, flush=True)
    time.sleep(300)
