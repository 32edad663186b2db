"""GPU programs for tests/gpu/test_runtime_gpu.py: `python gpu_modes.py kernel|reduce-overhead|cudagraphs|max-autotune`.

kernel: one fused pointwise Triton kernel over 2^27 floats, called 200 times; then torch.profiler
        measures that kernel's device time over 50 more calls and the program prints it per call.
reduce-overhead: a function that mutates its input, which CUDA graphs cannot capture.
cudagraphs: a pointwise function under reduce-overhead, called 20 times: warm-up, recording, replays.
max-autotune: a matrix product Inductor autotunes.
"""

import json
import sys

import torch

mode = sys.argv[1]
device = "cuda"


def pointwise(x):
    return torch.sin(x) * 2.0 + 1.0


def mutates(x, y):
    x.add_(1)
    return (x * y).sum()


def matmul(a, b):
    return (a @ b).relu()


if mode == "kernel":
    x = torch.randn(1 << 27, device=device)
    f = torch.compile(pointwise)
    for _ in range(200):
        f(x)
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(50):
            f(x)
        torch.cuda.synchronize()
    kernel_us = sum(e.device_time_total for e in prof.key_averages() if "triton" in e.key)
    print(json.dumps({"profiler_kernel_s_per_call": kernel_us / 1e6 / 50, "calls": 250}))
elif mode == "reduce-overhead":
    f = torch.compile(mutates, mode="reduce-overhead")
    x, y = torch.randn(64, device=device), torch.randn(64, device=device)
    for _ in range(5):
        f(x, y)
    torch.cuda.synchronize()
    print(json.dumps({"done": True}))
elif mode == "max-autotune":
    f = torch.compile(matmul, mode="max-autotune-no-cudagraphs")
    a, b = torch.randn(256, 256, device=device), torch.randn(256, 256, device=device)
    for _ in range(3):
        f(a, b)
    torch.cuda.synchronize()
    print(json.dumps({"done": True}))
elif mode == "cudagraphs":
    f = torch.compile(pointwise, mode="reduce-overhead")
    x = torch.randn(1 << 20, device=device)
    for _ in range(20):
        f(x)
    torch.cuda.synchronize()
    print(json.dumps({"calls": 20}))
