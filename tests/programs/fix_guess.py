"""dynscope fix stops its combined guess once a remedy in it loses (tests/integration/test_fix_guess.py).

keep-tensor removes helper's .item() break (fixed). The NumPy helper's remedies, torch.compiler.disable
on it, make its break's record vanish without fewer graphs: "moved to eager", never a win, so the guess
that every remedy wins is dead as soon as that trial ends. The guess is the one run with both changes:
it then sleeps, so that it is still running when that trial ends (deterministic, not a race)."""

import sys
import time

import numpy as np
import torch


def helper(x):
    return x * x.sum().item()


def block_rand_mask(n, k):
    rand_attn = np.zeros((n, k), dtype=np.int64)
    for i in range(n):
        rand_attn[i, :] = np.random.permutation(n)[:k]
    return rand_attn


class Net(torch.nn.Module):
    def forward(self, x):
        a = helper(x)
        m = torch.tensor(block_rand_mask(4, 2)).sum()
        return a + m


def main():
    torch.manual_seed(0)
    np.random.seed(0)
    net = torch.compile(Net(), backend="eager")
    x = torch.randn(4, 3)
    for _ in range(3):
        out = net(x)
    print(f"{out.sum().item():.4f}")
    both = "item" not in helper.__code__.co_names and getattr(block_rand_mask, "_torchdynamo_disable", False)
    if both:
        sys.stdout.flush()
        time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 20.0)


if __name__ == "__main__":
    main()
