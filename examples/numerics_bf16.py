"""A bf16 block (Linear, GELU, LayerNorm) whose compiled output differs from eager only by the
rounding a fused kernel is allowed: ``dynscope numerics`` reports it within eager's own error.

    python examples/numerics_bf16.py [--device cpu|cuda]
    dynscope numerics examples/numerics_bf16.py
"""

import argparse

import torch


class Block(torch.nn.Module):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(width, 4 * width)
        self.proj = torch.nn.Linear(4 * width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.nn.functional.gelu(self.fc(x))
        return self.norm(x + self.proj(hidden))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Block().to(args.device, torch.bfloat16)
    compiled = torch.compile(model, backend="inductor")
    x = torch.randn(16, 64, device=args.device, dtype=torch.bfloat16)
    with torch.no_grad():
        out = compiled(x)
        eager = model(x)
    print(f"max |compiled - eager|: {(out.float() - eager.float()).abs().max().item():.4f}")


if __name__ == "__main__":
    main()
