"""dynscope fix's stacked retry (tests/integration/test_fix_stacked.py): dropping the compiling clause lets
Dynamo trace on into helper's .item() twice more (a trade-off alone); on top of keep-tensor it removes the last break."""

import torch


def helper(x):
    return x * x.sum().item()


class Net(torch.nn.Module):
    def forward(self, x, mask=None):
        a = helper(x)
        if mask is None and not torch.compiler.is_compiling():
            mask = torch.ones_like(x)
        m = mask[:, 0:1]
        b = helper(x) * m + helper(x * 2.0) + helper(x * 3.0)
        return a + b


def main():
    torch.manual_seed(0)
    net = torch.compile(Net(), backend="eager")
    x = torch.randn(4, 3)
    for _ in range(3):
        out = net(x)
    print(f"{out.sum().item():.4f}")


if __name__ == "__main__":
    main()
