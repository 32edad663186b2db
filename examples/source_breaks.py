"""A small model whose graph breaks only a change to its code removes: what `dynscope fix`
rewrites in a shadow, proves by re-runs and writes with --diff (README: "Fix the code").

    python examples/source_breaks.py [--backend inductor|aot_eager|eager] [--steps N]
    dynscope fix examples/source_breaks.py --backend eager --diff fix.diff

One break of each kind the rewrite catalogue (dynscope/rewrites) covers and no setting fixes (a
print or an .item() is fixed by a setting, and a rewrite is tried only where no setting worked).
"""

import argparse
import logging

import torch

logger = logging.getLogger("source_breaks")


class Gate(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x):
        if (x > 100).any():  # break: a validation on a tensor's value
            raise ValueError("input out of range")
        y = torch.tanh(self.proj(x))
        logger.info("gate computed")  # break: a logger call writes outside the program
        if y.sum() > 0:  # break: a Python branch on a tensor's value
            y = y * 2.0
        else:
            y = y - 1.0
        return torch.relu(y) + x


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Gate(16)
    compiled = torch.compile(model, backend=args.backend)
    with torch.no_grad():
        for step in range(args.steps):
            out = compiled(torch.randn(8, 16) + step)
    print(f"output sum: {out.sum().item():.4f}")


if __name__ == "__main__":
    main()
