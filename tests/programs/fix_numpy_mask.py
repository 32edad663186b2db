"""A SpecAugment-like mask drawn from np.random inside a compiled function (dynscope fix, issue 40 item 5).

Inside compiled code Dynamo draws ``np.random.rand`` from torch's stream, so the compiled run prints other
numbers than eager; ``np.random.randint`` breaks the graph (its ``.item()``). The setting
``torch._dynamo.config.use_numpy_random_stream = True`` keeps NumPy's own stream: eager's numbers.
"""

import numpy as np
import torch


def mask(x):
    keep = torch.from_numpy(np.random.rand(x.shape[-1]) > 0.3).to(x.dtype)
    width = np.random.randint(1, 4)
    return x * keep + width


@torch.compile(backend="eager")
def augment(x):
    return mask(x * 2.0) + 1.0


np.random.seed(0)
torch.manual_seed(0)
x = torch.randn(2, 16)
for _ in range(3):
    print(round(augment(x).sum().item(), 4))
