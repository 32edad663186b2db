"""A model in the style of the examples with an .item() break, a print() break and a batch-size
recompile: what `dynscope fix` must fix (tests/integration/test_fix.py).

    python tests/programs/fix_model.py [--backend eager|aot_eager|inductor] [--device cpu|cuda]
"""

import argparse

import torch

import fix_helpers


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.relu(self.proj(x))
        scale = y.abs().max().item()  # break: .item()
        y = y / (scale + 1.0)
        print("normalized")  # break: print()
        return y * fix_helpers.SCALE


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Net().to(args.device)
    compiled = torch.compile(model, backend=args.backend)
    total = 0.0
    with torch.no_grad():
        for batch in (4, 8, 16):  # 4 -> 8: forward recompiles, then its batch dimension is dynamic
            total += compiled(torch.randn(batch, 8).to(args.device)).sum().item()
    print(f"total: {total:.4f}")


if __name__ == "__main__":
    main()
