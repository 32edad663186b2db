"""A NumPy helper draws a random time mask (SpecAugment's shape: wav2vec2 and its kin), called from a module's
method that takes and returns tensors. The helper is arrays in, arrays out: no escape hatch fits it, and
torch.compiler.disable only moves it to eager. dynscope fix offers the hatch on the caller instead: the method's
body runs as one opaque call in the graph, the NumPy draws still made at every call, in eager's order
(tests/integration/test_fix_hatches.py)."""

import numpy as np
import torch


def time_mask(shape, prob, rng_span):
    mask = np.zeros(shape, dtype=bool)
    starts = np.random.randint(0, shape[1] - rng_span, size=shape[0])
    for row, start in enumerate(starts):
        if np.random.rand() < prob:
            mask[row, start:start + rng_span] = True
    return mask


class Masking(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fill = torch.nn.Parameter(torch.full((8,), 0.25))

    def forward(self, hidden):
        mask = time_mask(hidden.shape[:2], 0.5, 3)
        return torch.where(torch.tensor(mask)[..., None], self.fill, hidden)


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.masking = Masking()

    def forward(self, x):
        return self.masking(torch.relu(self.proj(x))).sum(dim=-1)


torch.manual_seed(0)
np.random.seed(0)
net = Net()
compiled = torch.compile(net, backend="eager")
for _ in range(3):
    out = compiled(torch.randn(4, 10, 8))
    out.sum().backward()
    print(round(float(out.sum()), 4), round(float(net.masking.fill.grad.sum()), 4))
