"""A chain of pointwise ops Inductor fuses into one loop: compiled runs faster than eager.

Times itself, the same way dynscope times an entry point (perf_counter around each call):
the compiled function's first call (compiling) and later calls, and the eager function's
calls, and prints them as JSON for tests/integration/test_runtime_profile.py.
"""

import json
import sys
import time

import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30


def chain(x):
    for _ in range(12):
        x = torch.sin(x) * 1.01 + 0.1
    return x


def timed(fn, x, steps):
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - start)
    return times


torch.set_num_threads(1)
x = torch.randn(1 << 20)
compiled = torch.compile(chain)
compiled_times = timed(compiled, x, STEPS)
eager_times = timed(chain, x, STEPS)
print(json.dumps({"compiled": compiled_times, "eager": eager_times}))
