"""A small model with four kinds of graph break.

    python examples/graph_breaks.py [--backend inductor|aot_eager|eager] [--steps N]
"""

import argparse

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        y = F.gelu(self.proj(x))
        print("block output mean computed")  # break 1: print() is a Python side effect
        if y.mean() > 0:  # break 2: data-dependent control flow
            y = self.norm(y)
        scale = y.abs().max().item()  # break 3: .item() leaves the graph
        y = y / (scale + 1.0)
        torch._dynamo.graph_break()  # break 4: an explicit break
        return torch.relu(y) + x


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Block(16)
    compiled = torch.compile(model, backend=args.backend)
    x = torch.randn(8, 16)
    with torch.no_grad():
        for _ in range(args.steps):
            out = compiled(x)
    print(f"output sum: {out.sum().item():.4f}")


if __name__ == "__main__":
    main()
