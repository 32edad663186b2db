"""The shape rules (issue 40, item 2) on real torch.compile runs: a small model-like program breaks,
torch names the line, the catalogue rewrites the file, and the rewritten program compiles with no
break (torch's graph-break log) and whole (fullgraph=True), its outputs (and gradients, where it
trains) equal to the original's in eager, on inputs that take each branch. The site handed to the catalogue is the one
torch reported. backend="eager": the test is about Dynamo.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
import torch

from dynscope.rewrites import BreakSite
from dynscope.rewrites.catalogue import rewrites_for

Inputs = Callable[[], tuple[torch.Tensor, ...]]
_USER_FRAME = re.compile(r'File "(?P<file>[^"\n]+)", line (?P<line>\d+), in ')


@dataclass(frozen=True)
class Program:
    rule: str
    source: str
    inputs: tuple[Inputs, ...]  # each call's inputs (fresh tensors each time: gradients do not mix)
    after_has: str  # text the rewritten line must hold
    trains: bool = False  # compare the inputs' gradients too


def _lengths() -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    return torch.randint(0, 32, (2, 6)), torch.tensor([6, 4])


def _pool_inputs() -> tuple[torch.Tensor, ...]:
    return torch.linspace(-1.0, 1.0, 12).reshape(4, 3), torch.tensor([1, 3])


def _attention_inputs() -> tuple[torch.Tensor, ...]:
    torch.manual_seed(1)
    return torch.randn(2, 3, 3), torch.tensor([[True, True, False], [True, False, False], [True, True, True]])


def _gate_open() -> tuple[torch.Tensor, ...]:
    return torch.linspace(-1.0, 1.0, 8).reshape(2, 4), torch.ones(2, 4), torch.full((2, 1), 3.0)


def _gate_shut() -> tuple[torch.Tensor, ...]:
    return torch.linspace(-1.0, 1.0, 8).reshape(2, 4), torch.ones(2, 4), torch.full((2, 1), -3.0)


def _gated_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.linspace(-1.0, 1.0, 6).reshape(2, 3).requires_grad_(),
            torch.tensor([[0.5, 1.0, 0.0], [1.0, 0.25, 1.0]]).requires_grad_())


def _heads() -> tuple[torch.Tensor, ...]:
    torch.manual_seed(2)
    return torch.randn(2, 4, 3, 3), torch.tensor([3, 0, 2])


def _tokens_and_offset() -> tuple[torch.Tensor, ...]:
    return torch.arange(24.0).reshape(2, 6, 2), torch.tensor(2)


def _slots() -> tuple[torch.Tensor, ...]:
    torch.manual_seed(3)
    return torch.randn(5, 4), torch.randn(5, 4), torch.tensor([True, False, True, True, False])


def _tokens_many() -> tuple[torch.Tensor, ...]:
    torch.manual_seed(4)
    return (torch.randn(6, 4).requires_grad_(),)


def _tokens_one() -> tuple[torch.Tensor, ...]:  # two experts of four get no token: the dense form still adds none
    torch.manual_seed(5)
    return (torch.randn(1, 4).requires_grad_(),)


PROGRAMS = [
    Program("assert-to-check", '''
        import torch


        class TokenEmbedding(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.table = torch.nn.Embedding(32, 4)

            def forward(self, tokens, lengths):
                slen = tokens.shape[1]
                assert lengths.max().item() <= slen, "lengths exceed the padded sequence"
                positions = torch.arange(slen).unsqueeze(0) < lengths.unsqueeze(1)
                return self.table(tokens) * positions.unsqueeze(-1)


        _MODEL = TokenEmbedding()


        def forward(tokens, lengths):
            return _MODEL(tokens, lengths)
        ''', (_lengths,), "torch._assert_async(lengths.max() <= slen,"),
    Program("assert-to-check-flowing", '''
        import torch


        class PaddedPooling(torch.nn.Module):
            def forward(self, tokens, lengths):
                longest = lengths.max().item()
                assert longest <= tokens.shape[1], "lengths exceed the padded sequence"
                if longest == 0:
                    raise ValueError("empty batch")
                mask = torch.arange(tokens.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
                return (tokens * mask).sum(1) / lengths


        _MODEL = PaddedPooling()


        def forward(tokens, lengths):
            return _MODEL(tokens, lengths)
        ''', (_lengths,), "longest = lengths.max()\n"),
    Program("assert-to-check-message", '''
        import torch


        def forward(x, counts):
            assert int(counts.sum()) == x.shape[0], f"counts cover {counts.sum()} rows of {x.shape[0]}"
            return x.mean(0) * 2
        ''', (_pool_inputs,), "torch._assert_async(counts.sum() == x.shape[0])\n"),
    Program("guard-to-check", '''
        import torch


        def forward(scores, mask):
            if mask.sum(-1).min().item() == 0:
                raise ValueError("a query attends to no key")
            return scores.masked_fill(~mask, float("-inf")).softmax(-1)
        ''', (_attention_inputs,), "torch._assert_async(torch.logical_not(mask.sum(-1).min() == 0),"),
    Program("item-where", '''
        import torch


        class GatedResidual(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)
                torch.nn.init.eye_(self.proj.weight)
                torch.nn.init.zeros_(self.proj.bias)

            def forward(self, hidden, residual, score):
                if score.sigmoid().mean().item() > 0.5:
                    return self.proj(hidden) + residual
                return residual


        _MODEL = GatedResidual()


        def forward(hidden, residual, score):
            return _MODEL(hidden, residual, score)
        ''', (_gate_open, _gate_shut), "return torch.where(score.sigmoid().mean() > 0.5, self.proj(hidden) + residual, residual)"),
    Program("item-where-flowing", '''
        import torch


        def forward(hidden, residual, score):
            confidence = score.sigmoid().mean().item()
            scaled = hidden * 2
            if confidence > 0.5:
                return scaled + residual
            return residual
        ''', (_gate_open, _gate_shut), "return torch.where(confidence > 0.5, scaled + residual, residual)"),
    Program("clone-repeated-input", '''
        import torch


        class GatedProduct(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, gate, mask):
                ctx.save_for_backward(x, gate, mask)
                return x * gate * mask

            @staticmethod
            def backward(ctx, grad):
                x, gate, mask = ctx.saved_tensors
                return grad * gate * mask, grad * x * mask, grad * x * gate


        def forward(x, mask):
            return GatedProduct.apply(x, mask, mask).sum(-1)
        ''', (_gated_inputs,), "GatedProduct.apply(x, mask, mask.clone())", trains=True),
    Program("index-select-comprehension", '''
        import torch


        class HeadPruner(torch.nn.Module):
            """Keeps the attention heads an index tensor names, in its order."""

            def forward(self, attn, kept_heads):
                heads = [attn[:, kept_heads[i]] for i in range(len(kept_heads))]
                return torch.stack(heads, 1).softmax(-1)


        _MODEL = HeadPruner()


        def forward(attn, kept_heads):
            return _MODEL(attn, kept_heads)
        ''', (_heads,), "heads = list(attn.index_select(1, kept_heads).unbind(1))"),
    Program("nonzero-to-where", '''
        import torch


        class SlotMemory(torch.nn.Module):
            """Refreshes the memory slots a mask marks new, from a projection of the update."""

            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.proj = torch.nn.Linear(4, 4)

            def forward(self, memory, update, is_new):
                memory = memory.clone()
                rows = is_new.nonzero(as_tuple=True)[0]
                memory[rows] = torch.tanh(self.proj(update[rows])) + memory[rows]
                return memory


        _MODEL = SlotMemory()


        def forward(memory, update, is_new):
            return _MODEL(memory, update, is_new)
        ''', (_slots,), "memory.copy_(torch.where(is_new.bool().reshape(-1, *([1] * (memory.dim() - 1))), "),
    Program("dense-expert-loop", '''
        import torch


        class SparseMoe(torch.nn.Module):
            """Sends each token to its two best experts, as transformers' eager experts do."""

            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.num_experts = 4
                self.gate = torch.nn.Linear(4, 4, bias=False)
                self.up_proj = torch.nn.Parameter(torch.randn(4, 6, 4) * 0.5)
                self.down_proj = torch.nn.Parameter(torch.randn(4, 4, 6) * 0.5)

            def forward(self, hidden_states):
                top_k_weights, top_k_index = self.gate(hidden_states).softmax(-1).topk(2, dim=-1)
                final_hidden_states = torch.zeros_like(hidden_states)
                with torch.no_grad():
                    expert_mask = torch.nn.functional.one_hot(top_k_index, num_classes=self.num_experts + 1)
                    expert_mask = expert_mask.permute(2, 1, 0)
                    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
                for expert_idx in expert_hit:
                    expert_idx = expert_idx[0]
                    if expert_idx == self.num_experts:
                        continue
                    top_k_pos, token_idx = torch.where(expert_mask[expert_idx])
                    current = torch.nn.functional.linear(hidden_states[token_idx], self.up_proj[expert_idx]).relu()
                    current = torch.nn.functional.linear(current, self.down_proj[expert_idx])
                    current = current * top_k_weights[token_idx, top_k_pos, None]
                    final_hidden_states.index_add_(0, token_idx, current.to(final_hidden_states.dtype))
                return final_hidden_states


        _MODEL = SparseMoe()


        def forward(hidden_states):
            return _MODEL(hidden_states)
        ''', (_tokens_many, _tokens_one), "top_k_pos, token_idx = torch.unravel_index(", trains=True),
    Program("tensor-offset", '''
        import torch


        def forward(hidden, offset):
            shifted = torch.roll(hidden, shifts=-int(offset), dims=1)
            return shifted * 2 + hidden
        ''', (_tokens_and_offset,), "torch.arange(hidden.shape[1], device=hidden.device) - (-offset)"),
    Program("tensor-offset-flowing", '''
        import torch


        class LocalWindow(torch.nn.Module):
            """Rotates the sequence by a learned-elsewhere offset and keeps a window from it."""

            def forward(self, hidden, offset):
                shift = int(offset)
                rolled = torch.roll(hidden, shifts=-shift, dims=1)
                return rolled.narrow(1, shift, 3) + 1


        _MODEL = LocalWindow()


        def forward(hidden, offset):
            return _MODEL(hidden, offset)
        ''', (_tokens_and_offset,), "shift = offset\n"),
    Program("tensor-offset-narrow", '''
        import torch


        def forward(hidden, offset):
            window = hidden.narrow(1, offset.item(), 3)
            return window.mean(1)
        ''', (_tokens_and_offset,), "window = hidden.narrow(1, offset, 3)"),
]


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Breaks(logging.Handler):
    """The graph breaks torch logs (torch._logging's graph_breaks artifact), as they come."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


_LOGGED = re.compile(r"Graph break in user code at (?P<file>.+?):(?P<line>\d+)\nGraph Break Reason: [^\n]*\n\n(?P<text>.*)", re.DOTALL)


def _sites(path: Path, forward: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]) -> list[BreakSite]:
    """The breaks torch reports in ``path`` on a plain compile (its graph-break log: explain and fullgraph
    capture scalars that a plain run does not), then any break fullgraph's error names there."""
    breaks = _Breaks()
    logger = logging.getLogger("torch._dynamo")
    logger.addHandler(breaks)
    torch._logging.set_logs(graph_breaks=True)
    torch._dynamo.reset()
    try:
        torch.compile(forward, backend="eager")(*inputs)
        sites = []
        for message in breaks.messages:
            logged = _LOGGED.match(message)
            if logged is not None and Path(logged.group("file")) == path:
                headline, _, rest = logged.group("text").partition("\n")
                sites.append(BreakSite(line=int(logged.group("line")), gb_type=headline, reason=rest))
        if sites:
            return sites
        torch._dynamo.reset()
        torch.compile(forward, backend="eager", fullgraph=True)(*inputs)
        return []
    except Exception as error:  # torch's Unsupported for a break it does not resume (a duplicate input to apply)
        text = str(error)
        lines = [int(m.group("line")) for m in _USER_FRAME.finditer(text) if Path(m.group("file")) == path]
        headline, _, rest = text.partition("\n")
        return [BreakSite(line=lines[-1], gb_type=headline, reason=rest)] if lines else [BreakSite(0, headline, rest)]
    finally:
        torch._logging.set_logs()
        logger.removeHandler(breaks)
        torch._dynamo.reset()


def _run(forward: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...], trains: bool,
         ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The output on ``inputs`` and, when the program trains, the gradients of its inputs."""
    output = forward(*inputs)
    if not trains:
        return output.detach(), []
    output.sum().backward()
    return output.detach(), [t.grad.clone() for t in inputs if t.grad is not None]


def _same(left: tuple[torch.Tensor, list[torch.Tensor]], right: tuple[torch.Tensor, list[torch.Tensor]]) -> bool:
    return torch.allclose(left[0], right[0]) and len(left[1]) == len(right[1]) and \
        all(torch.allclose(a, b) for a, b in zip(left[1], right[1], strict=True))


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.rule for p in PROGRAMS])
def test_the_shape_rule_removes_the_break_torch_reported_with_equal_outputs(program: Program, tmp_path: Path) -> None:
    stem = program.rule.replace("-", "_")
    before = tmp_path / f"{stem}_before.py"
    before.write_text(textwrap.dedent(program.source).lstrip("\n"), encoding="utf-8")
    eager = [_run(_load(before, f"{stem}_eager").forward, make(), program.trains) for make in program.inputs]

    sites = _sites(before, _load(before, f"{stem}_sites").forward, program.inputs[0]())
    assert sites, "the program must break before the rewrite"
    rule = program.rule.removesuffix("-flowing").removesuffix("-message").removesuffix("-narrow")
    candidates = {r.rule: r for r in rewrites_for(before.read_text(encoding="utf-8"), sites[0])}
    assert rule in candidates, f"{rule} did not answer {sites[0]}; got {sorted(candidates)}"
    rewrite = candidates[rule]
    assert program.after_has in rewrite.source, rewrite.source

    after = tmp_path / f"{stem}_after.py"
    after.write_text(rewrite.source, encoding="utf-8")
    settings = {name: True for name in rewrite.settings}
    with torch._dynamo.config.patch(settings):
        forward = _load(after, f"{stem}_after").forward
        assert _sites(after, forward, program.inputs[0]()) == [], "the rewritten program still breaks"
        for make, expected in zip(program.inputs, eager, strict=True):
            torch._dynamo.reset()
            try:
                compiled = _run(torch.compile(forward, backend="eager", fullgraph=True), make(), program.trains)
            finally:
                torch._dynamo.reset()
            assert _same(compiled, expected), (compiled, expected)
