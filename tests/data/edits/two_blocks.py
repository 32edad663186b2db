"""Two classes with a method of the same name, each with a graph break (the edit corpus, issue 41)."""

import torch


def unrelated_helper(n: int) -> int:
    return n + 1


class Encoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x).relu()
        if h.sum() > 0:  # data-dependent branch
            h = h * 2
        return h


class Decoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, h):
        out = self.proj(h)
        if out.sum() > 0:  # the same break, in another class's forward
            out = out - 1
        return out.tanh()


def main() -> None:
    torch.manual_seed(unrelated_helper(0))
    encoder, decoder = Encoder(), Decoder()
    step = torch.compile(lambda x: decoder(encoder(x)), backend="eager")
    with torch.no_grad():
        print(f"{step(torch.randn(2, 8)).sum().item():.4f}")


if __name__ == "__main__":
    main()
