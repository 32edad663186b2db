"""An atomic-add scatter: index_add_ of many float32 values into a few rows, compiled. On a GPU
Inductor's kernel adds with atomics, whose order (and so whose rounding) changes run to run.

    python tests/programs/numerics_scatter.py [--device cuda]
"""

import argparse

import torch


def scatter(x: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    out.index_add_(0, index, src)
    return out * 2.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    rows, n = 8, 1 << 20
    x = torch.zeros(rows, 16, device=args.device)
    index = torch.randint(0, rows, (n,), device=args.device)  # ~131k duplicates per row
    src = torch.randn(n, 16, device=args.device) * torch.logspace(-3, 3, n, device=args.device)[:, None]
    out = torch.compile(scatter, backend="inductor")(x, index, src)
    print(f"sum: {out.sum().item():.3f}")


if __name__ == "__main__":
    main()
