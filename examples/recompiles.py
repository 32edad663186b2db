"""Recompiles from a changing input shape and from a changing Python constant.

    python examples/recompiles.py [--backend inductor|aot_eager|eager]
"""

import argparse

import torch


def scaled_softmax(x, temperature):
    return torch.softmax(x / temperature, dim=-1)


class Gate(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mode = "sum"

    def forward(self, x):
        if self.mode == "sum":  # a guard on a Python attribute
            return x.sum(dim=-1)
        return x.amax(dim=-1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="inductor")
    args = parser.parse_args()
    torch.manual_seed(0)
    softmax = torch.compile(scaled_softmax, backend=args.backend)
    total = 0.0
    for rows in (4, 6, 8):  # 4 -> 6 changes a shape: one recompile, then it is dynamic
        total += softmax(torch.randn(rows, 10), 2.0).sum().item()
    for temperature in (2, 3):  # an int constant is specialized: each new value recompiles
        total += softmax(torch.randn(4, 10), temperature).sum().item()
    gate = Gate()
    compiled_gate = torch.compile(gate, backend=args.backend)
    x = torch.randn(3, 5)
    total += compiled_gate(x).sum().item()
    gate.mode = "max"  # guard failure: self.mode == 'sum'
    total += compiled_gate(x).sum().item()
    print(f"total: {total:.4f}")


if __name__ == "__main__":
    main()
