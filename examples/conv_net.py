"""A small conv net: conv -> batchnorm -> gelu -> linear, with an input check that Dynamo
traces into an `_assert_async` instead of breaking the graph. One training step.

    python examples/conv_net.py [--backend inductor|aot_eager|eager]
"""

import argparse

import torch
import torch.nn.functional as F


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 10)

    def forward(self, x):
        assert torch.all(x >= 0), "inputs must be non-negative"
        y = F.gelu(self.bn(self.conv(x)))
        y = y.mean(dim=(2, 3))
        return self.head(y)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="inductor")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = ConvNet().to(device)
    compiled = torch.compile(model, backend=args.backend)
    x = torch.rand(4, 3, 8, 8, device=device)
    loss = compiled(x).logsumexp(dim=-1).mean()
    loss.backward()
    print(f"loss: {loss.item():.4f} on {device}")


if __name__ == "__main__":
    main()
