"""A backend that fails: the compile error is recorded, then the program dies of it."""

import torch


def broken_backend(gm, example_inputs):
    raise RuntimeError("this backend cannot compile anything")


def f(x):
    return x.sin() + 1


torch.compile(f, backend=broken_backend)(torch.ones(3))
