"""The README's `train.py`: a stand-in for the user's training script (tests/integration/test_readme_usage.py).

A tiny model trained for a few steps with torch.compile (Inductor): a linear layer and a GELU
(kernel cpp_fused_gelu_0), a graph break at a print, and a recompile when the batch size changes.
The print is the forward's last statement and the loss is summed outside it, so the break leaves
no second graph to compile: two compiles (0/0 and its recompile 0/1) instead of four, all the
README needs, in each of the README test's runs of this script.
"""

import argparse

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.nn.functional.gelu(self.linear(x))
        print("step")  # a graph break
        return y


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Model()
    step = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(args.epochs):
        for batch in (4, 6)[: args.steps]:  # a new batch size: one recompile
            loss = step(torch.randn(batch, 8)).sum()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()


if __name__ == "__main__":
    main()
