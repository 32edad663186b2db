"""A training loop that compiles model + loss together.

    python examples/train_loop.py [--backend inductor|aot_eager|eager] [--epochs N] [--steps N]
"""

import argparse

import torch
import torch.nn.functional as F


class MLP(torch.nn.Module):
    def __init__(self, width: int = 32, classes: int = 4) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(width, width)
        self.fc2 = torch.nn.Linear(width, classes)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    @torch.compile(backend=args.backend)
    def loss_fn(x, y):
        return F.cross_entropy(model(x), y)

    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    for epoch in range(args.epochs):
        for _ in range(args.steps):
            optimizer.zero_grad()
            loss = loss_fn(x, y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
