"""A small transformer-style model for `dynscope minify` tests (82 compute nodes; 19 with --mlp).

Usage: minify_model.py [--bug compile_error|runtime_error|accuracy] [--train] [--aot-fault]
                       [--device cpu|cuda] [--mlp]

--bug turns on torch's own fault injection in Inductor's relu lowering
(torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY on CPU,
triton.inject_relu_bug_TESTING_ONLY on CUDA); the model uses relu once, in the second
block's MLP, so the failure sits in the middle of the graph. --train runs a training step
(forward, backward, optimizer step) instead of inference. --aot-fault compiles with a
custom AOTAutograd backend whose decomposition of GELU is broken. --check exits 1 when the
compiled result differs from eager (for bisection tools that judge by exit status). --mlp
leaves attention out of the blocks (the same three blocks, relu still in the middle one; 19
compute nodes of 6 distinct ops instead of 82 of 14): the CPU tests use it, since every kernel
Inductor generates for the model is one more gcc run in each test that compiles it, and the
minifier takes the same steps on it (backends, op screening, subsystems, repro).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        out = scores.softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, activation, attention: bool = True) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim) if attention else None
        self.attn = Attention(dim, heads) if attention else None
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm1 is not None and self.attn is not None:
            x = x + self.attn(self.norm1(x))
        return x + self.fc2(self.activation(self.fc1(self.norm2(x))))


class Model(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4, classes: int = 10, attention: bool = True) -> None:
        super().__init__()
        self.embed = nn.Linear(16, dim)
        self.blocks = nn.ModuleList([Block(dim, heads, activation, attention) for activation in (F.gelu, torch.relu, F.gelu)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(dim=1))


def broken_gelu(x, approximate="none"):
    # A decomposition with a bug: it asks for a dimension the tensor does not have.
    return x.sum(dim=7) * 0.5


def aot_backend_with_broken_decomposition():
    from torch._decomp import core_aten_decompositions
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    table = dict(core_aten_decompositions())
    table[torch.ops.aten.gelu.default] = broken_gelu
    return aot_autograd(fw_compiler=lambda gm, _: make_boxed_func(gm.forward), decompositions=table)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", choices=["compile_error", "runtime_error", "accuracy"])
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--aot-fault", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--mlp", action="store_true")
    args = parser.parse_args()
    if args.bug and args.device == "cpu":
        torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = args.bug
    elif args.bug:
        torch._inductor.config.triton.inject_relu_bug_TESTING_ONLY = args.bug

    torch.manual_seed(0)
    model = Model(attention=not args.mlp).to(args.device)
    x = torch.randn(4, 8, 16, device=args.device)
    target = torch.randint(0, 10, (4,), device=args.device)
    backend = aot_backend_with_broken_decomposition() if args.aot_fault else "inductor"
    compiled = torch.compile(model, backend=backend)
    if args.train:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = F.cross_entropy(compiled(x), target)
        loss.backward()
        optimizer.step()
        print(f"loss {loss.item():.4f}")
    else:
        with torch.no_grad():
            logits = compiled(x)
            print(f"logits {logits.sum().item():.4f}")
            if args.check and not torch.allclose(logits, model(x), rtol=1e-3, atol=1e-3):
                raise SystemExit("compiled logits differ from eager")


if __name__ == "__main__":
    main()
