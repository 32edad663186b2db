"""The README's `mypkg.train`: a stand-in for the user's training module (run with -m), compiled
with the eager backend to keep the README test cheap."""

import torch


def main() -> None:
    model = torch.nn.Linear(8, 8)
    step = torch.compile(model, backend="eager")
    for _ in range(2):
        step(torch.randn(4, 8)).sum().backward()


if __name__ == "__main__":
    main()
