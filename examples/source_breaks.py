"""A small model whose graph breaks a change to its code removes: what `dynscope fix`
rewrites in a shadow, proves by re-runs and writes with --diff (README: "Fix the code").

    python examples/source_breaks.py [--backend inductor|aot_eager|eager] [--steps N]
    dynscope fix examples/source_breaks.py --backend eager --diff fix.diff

One break of each kind the rewrite catalogue (dynscope/rewrites, docs/rewrites.md) removes in a
program this small, each at a line of its own; the comment on (or above) the line names the rule.
Every call gets the same batch, so each break is met once and removing one moves no other.
Left out, and why (torch 2.13):
- traced-print: a second answer to the kind guard-logging shows (a print or log call);
- check-size: needs capture_scalar_outputs; keep-tensor shows the .item() kind with no setting;
- assert-to-check: torch itself turns `assert <tensor>, "literal"` into torch._assert_async (no
  break), and the rule declines the forms that do break (a message that is not a literal);
- numpy-to-torch: torch traces NumPy functions on tensors itself (torch._numpy): no break;
- generator-to-list: torch traces `sum(... for ...)` and `next(iter(...))`: no break;
- floor-div-ints: torch.div on Python ints in a size (view, narrow, split, new_zeros) traces; only
  a slice bound fails, and there the whole frame is skipped, so the rewrite adds a graph and the
  judge calls it `moved to eager`;
- disable-numpy-helper: the helper's own frame makes no graph, so decorating it leaves the graphs
  as many as before: `moved to eager`, never `fixed`;
- drop-compiling-clause: the frame torch gives up on runs eagerly and never breaks at a line.
"""

import argparse
import copy
import logging

import numpy as np
import torch

logger = logging.getLogger("source_breaks")



def chunk_length(a: int, b: int) -> int:
    return np.lcm(a, b)


class Gate(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(width, width)
        self.out = torch.nn.Linear(width, width)

    def forward(self, x):
        if (x > 100).any():  # guard-to-check: a validation on a tensor's value
            raise ValueError("input out of range")
        y = torch.tanh(self.proj(x))
        logger.info("gate computed")  # guard-logging: a logger call writes outside the program
        if y.sum() > 0:  # tensor-where: a Python branch on a tensor's value
            y = y * 2.0
        else:
            y = y - 1.0
        # tensor-cond: a branch whose arm is more than one expression
        if y.mean() > 0:
            h = y.relu()
            z = h * 0.5
        else:
            z = y + 1.0
        y = z
        chunk = chunk_length(2, 4)  # numpy-int-math: NumPy integer math on Python ints
        if y.shape[-1] % chunk != 0:
            y = y + 1.0
        snapshot = copy.deepcopy(y.detach())  # deepcopy-to-clone: deepcopy of a tensor
        y = y + snapshot
        scale = self.proj.weight.abs().max().item()  # keep-tensor: a number only used in tensor arithmetic
        y = y / scale
        # last: torch finds this leak only when the graph is done, then traces the frame again
        bias = torch.zeros_like(y).requires_grad_()  # drop-requires-grad: a new tensor made to need grad
        y = y + bias
        return self.out(torch.relu(y)) + x


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Gate(16)
    compiled = torch.compile(model, backend=args.backend)
    batch = torch.randn(8, 16)
    for _ in range(args.steps):  # one batch: every call takes the same branches
        out = compiled(batch)
    print(f"output sum: {out.sum().item():.4f}")


if __name__ == "__main__":
    main()
