"""A small MLP whose compiled relu is wrong on purpose: torch's own fault injection for Inductor.

    python examples/numerics_relu_bug.py [--inject-relu-bug] [--device cpu|cuda] [--train]
    dynscope numerics examples/numerics_relu_bug.py --inject-relu-bug

With ``--inject-relu-bug`` the example sets Inductor's testing-only switch that miscompiles relu
(``cpp.inject_relu_bug_TESTING_ONLY`` for C++ kernels, ``triton.`` for GPU ones, "accuracy": the
generated relu adds 1); ``dynscope numerics`` then names the relu below as the first suspect.
"""

import argparse

import torch
import torch._inductor.config as inductor_config


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.fc1(x)
        hidden = torch.relu(hidden)  # the relu (the injected bug miscompiles it)
        return self.fc2(hidden)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inject-relu-bug", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--train", action="store_true", help="also run backward (one step)")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    if args.inject_relu_bug:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
        inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"
    torch.manual_seed(0)
    model = MLP().to(args.device)
    compiled = torch.compile(model, backend="inductor")
    x = torch.randn(8, 16, device=args.device)
    for _ in range(args.calls):
        if args.train:
            out = compiled(x)
            out.sum().backward()
        else:
            with torch.no_grad():
                out = compiled(x)
    print(f"output sum: {out.sum().item():.6f}")


if __name__ == "__main__":
    main()
