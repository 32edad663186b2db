"""A chain of pointwise ops Inductor fuses into one loop: compiled runs faster than eager.

Times each call of the compiled function the way dynscope times an entry point
(perf_counter around the call; the first one compiles) and prints the times as JSON. With
``--log PATH`` it also appends them to PATH, one line per run: under ``dynscope explain
--vs-eager`` the eager twin (compilation forced off) appends its own line, so
tests/integration/test_runtime_profile.py can check each of dynscope's figures against
times taken in the same process, at the same moment.
"""

import argparse
import json
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("steps", type=int, nargs="?", default=30)
parser.add_argument("--log")
args = parser.parse_args()


def chain(x):
    for _ in range(12):
        x = torch.sin(x) * 1.01 + 0.1
    return x


torch.set_num_threads(1)
x = torch.randn(1 << 20)
compiled = torch.compile(chain)
times = []
for _ in range(args.steps):
    start = time.perf_counter()
    compiled(x)
    times.append(time.perf_counter() - start)
line = json.dumps({"compiled": times})
print(line)
if args.log:
    with open(args.log, "a") as log:
        log.write(line + "\n")
