"""SpecAugment's shape, typed as transformers writes it: a NumPy helper draws a random time mask, and its caller
makes the array a tensor on the next line. dynscope fix offers numpy-helper-op there before the hatch on the whole
caller: the helper alone becomes a torch.library.custom_op in the graph, its draws still made at every call in
eager's order, the rest of the caller traced (tests/integration/test_fix_hatches.py)."""

import numpy as np
import torch


def time_mask(shape: tuple[int, int], prob: float, span: int = 3) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    starts = np.random.randint(0, shape[1] - span, size=shape[0])
    for row, start in enumerate(starts):
        if np.random.rand() < prob:
            mask[row, start:start + span] = True
    return mask


class Masking(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fill = torch.nn.Parameter(torch.full((8,), 0.25))

    def forward(self, hidden):
        batch, steps, _ = hidden.shape
        mask = time_mask((batch, steps), 0.5)
        mask = torch.tensor(mask, device=hidden.device, dtype=torch.bool)
        return torch.where(mask[..., None], self.fill, hidden)


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
