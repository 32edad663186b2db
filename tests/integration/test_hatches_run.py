"""Torch's escape hatches on real torch.compile runs: a helper breaks, torch names the line, the
catalogue decorates the helper with what the installed torch offers (probes/compat records it as fix's
child does), and the rewritten program compiles whole (fullgraph=True) with equal outputs.
backend="eager" and "aot_eager" (the hatch is about Dynamo; aot_eager also traces nonstrict_trace's body).
"""

from __future__ import annotations

import importlib.util
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch

from dynscope.model.fix import HATCH_FEATURES
from dynscope.probes import compat
from dynscope.rewrites import BreakSite, Offers, Rewrite
from dynscope.rewrites.catalogue import rewrites_for

# a helper that takes a lock around its tensor work: Dynamo cannot enter the lock
LOCKED = '''
    import threading

    import torch

    _LOCK = threading.Lock()


    def scaled(x, w):
        with _LOCK:
            return x * w + 1


    def forward(x, w):
        return scaled(x.cos(), w) - 1
    '''

# a helper that decides on a tensor's value in Python: only leaf_function runs it as it is
DECIDES = '''
    import torch


    def clipped(x, limit):
        if x.abs().max().item() > limit:
            return x.clamp(-limit, limit)
        return x * 2


    def forward(x, w):
        return clipped(x * w, 1.5) + 1
    '''


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"hatch_{path.stem}_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _breaks(forward: Callable[..., torch.Tensor], path: Path, *args: torch.Tensor) -> list[BreakSite]:
    torch._dynamo.reset()
    explained = torch._dynamo.explain(forward)(*args)
    torch._dynamo.reset()
    sites = []
    for reason in explained.break_reasons:
        frames = [frame for frame in reason.user_stack if Path(frame.filename) == path]
        if frames:
            headline, _, rest = reason.reason.partition("\n")
            sites.append(BreakSite(frames[-1].lineno, headline, rest or headline))
    return sites


def _whole(forward: Callable[..., torch.Tensor], backend: str, *args: torch.Tensor) -> torch.Tensor:
    torch._dynamo.reset()
    try:
        return torch.compile(forward, backend=backend, fullgraph=True)(*args)
    finally:
        torch._dynamo.reset()


def _hatch(tmp_path: Path, program: str, rule: str) -> tuple[ModuleType, ModuleType, Rewrite]:
    before = tmp_path / "before.py"
    before.write_text(textwrap.dedent(program).lstrip("\n"), encoding="utf-8")
    x, w = torch.linspace(-2.0, 2.0, 8), torch.full((8,), 0.75)
    plain = _load(before)
    sites = _breaks(plain.forward, before, x, w)
    assert sites, "the program must break before the rewrite"
    features = compat.remedy_features()  # what fix's child records
    offers = Offers(frozenset(name for name in HATCH_FEATURES if features.get(name) is True), frozenset({"forward"}))
    assert {"nonstrict_trace", "leaf_function"} <= offers.hatches, "torch 2.13 has both"
    found = {r.rule: r for r in rewrites_for(before.read_text(encoding="utf-8"), sites[0], offers)}
    assert rule in found, f"{rule} did not answer {sites[0]}; got {sorted(found)}"
    after = tmp_path / f"{rule.replace('-', '_')}.py"
    after.write_text(found[rule].source, encoding="utf-8")
    return plain, _load(after), found[rule]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_nonstrict_trace_keeps_the_locked_helper_in_one_graph(tmp_path: Path, backend: str) -> None:
    plain, hatched, rewrite = _hatch(tmp_path, LOCKED, "nonstrict-trace")
    assert "@torch._dynamo.nonstrict_trace\ndef scaled(x, w):" in rewrite.source and not rewrite.settings
    x, w = torch.linspace(-2.0, 2.0, 8), torch.full((8,), 0.75)
    expected = plain.forward(x, w)
    assert torch.equal(hatched.forward(x, w), expected)  # the program still runs without compile
    assert _breaks(hatched.forward, tmp_path / "nonstrict_trace.py", x, w) == []
    assert torch.allclose(_whole(hatched.forward, backend, x, w), expected)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_runs_the_deciding_helper_at_every_call(tmp_path: Path, backend: str) -> None:
    plain, hatched, rewrite = _hatch(tmp_path, DECIDES, "leaf-function")
    assert rewrite.settings == ("leaf_function_validate_outputs",)
    x, w = torch.linspace(-2.0, 2.0, 8), torch.full((8,), 0.75)
    small = torch.full((8,), 0.1)
    torch._dynamo.config.leaf_function_validate_outputs = True  # as the trial sets it
    try:
        assert _breaks(hatched.forward, tmp_path / "leaf_function.py", x, w) == []
        torch._dynamo.reset()
        compiled = torch.compile(hatched.forward, backend=backend, fullgraph=True)
        # both arms of the Python decision, in one compiled graph: the helper runs as Python each call
        assert torch.allclose(compiled(x, w), plain.forward(x, w))
        assert torch.allclose(compiled(x, small), plain.forward(x, small))
    finally:
        torch._dynamo.config.leaf_function_validate_outputs = False
        torch._dynamo.reset()


def test_a_leaf_function_whose_output_is_not_shaped_like_its_input_fails_its_trial(tmp_path: Path) -> None:
    reduces = DECIDES.replace("return x * 2", "return (x * 2).sum()").replace("x.clamp(-limit, limit)",
                                                                              "x.clamp(-limit, limit).sum()")
    _plain, hatched, _rewrite = _hatch(tmp_path, reduces, "leaf-function")
    x, w = torch.linspace(-2.0, 2.0, 8), torch.full((8,), 0.75)
    torch._dynamo.config.leaf_function_validate_outputs = True
    try:
        with pytest.raises(Exception, match="Shape mismatch"):
            _whole(hatched.forward, "eager", x, w)
    finally:
        torch._dynamo.config.leaf_function_validate_outputs = False


# an expert loop in a module's forward: which experts run, and on which rows, only the data decides
EXPERT_LOOP = '''
    import torch


    class Experts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 4 * 8 * 8).reshape(4, 8, 8))

        def forward(self, hidden, route):
            out = torch.zeros_like(hidden)
            for expert in (torch.bincount(route, minlength=4) > 0).nonzero():
                rows = torch.where(route == expert[0])[0]
                out.index_add_(0, rows, hidden[rows] @ self.w[expert[0]])
            return out


    EXPERTS = Experts()


    def step(x):
        route = (x.sum(-1) > 0).long() + 2 * (x[:, 0] > 0).long()
        return EXPERTS(x.cos(), route).sin()
    '''


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_method_takes_an_expert_loop_whole_into_the_graph_with_its_gradients(tmp_path: Path, backend: str) -> None:
    before = tmp_path / "experts.py"
    before.write_text(textwrap.dedent(EXPERT_LOOP).lstrip("\n"), encoding="utf-8")
    x = torch.linspace(-3.0, 3.0, 6 * 8).reshape(6, 8).sin()
    plain = _load(before)
    sites = [s for s in _breaks(plain.step, before, x) if 10 <= s.line <= 14]
    assert sites, "the expert loop must break before the rewrite"
    offers = Offers(frozenset({"nonstrict_trace", "leaf_function"}), frozenset({"step"}))
    found = {r.rule: r for r in rewrites_for(before.read_text(encoding="utf-8"), sites[0], offers)}
    assert "leaf-method" in found, sorted(found)
    after = tmp_path / "experts_leaf.py"
    after.write_text(found["leaf-method"].source, encoding="utf-8")
    hatched = _load(after)
    expected = plain.step(x)
    expected.sum().backward()
    torch._dynamo.config.leaf_function_validate_outputs = True  # as the trial sets it
    try:
        assert _breaks(hatched.step, after, x) == []
        out = _whole(hatched.step, backend, x)
        assert torch.allclose(out, expected)
        torch._dynamo.reset()
        torch.compile(hatched.step, backend=backend, fullgraph=True)(x).sum().backward()
        assert torch.allclose(hatched.EXPERTS.w.grad, plain.EXPERTS.w.grad)  # the weights still learn
    finally:
        torch._dynamo.config.leaf_function_validate_outputs = False
        torch._dynamo.reset()


# SpecAugment's shape: a NumPy helper draws a mask on the host, its caller makes it a tensor
SPAN_MASK = '''
    import numpy as np
    import torch


    def span_mask(shape: tuple[int, int], prob: float, length: int = 2) -> np.ndarray:
        mask = np.zeros(shape, dtype=bool)
        starts = np.random.randint(0, shape[1] - length, size=shape[0])
        for row, start in enumerate(starts):
            mask[row, start : start + length] = np.random.rand() < prob
        return mask


    class Masking(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 8))

        def forward(self, hidden):
            batch, steps, width = hidden.shape
            mask = span_mask((batch, steps), 0.9)
            mask = torch.tensor(mask, device=hidden.device, dtype=torch.bool)
            return hidden.masked_fill(mask[..., None], 0.0) * self.scale


    MASKING = Masking()


    def step(x):
        return MASKING(x.cos()).sin()
    '''


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_numpy_helper_op_keeps_the_mask_in_one_graph_with_eagers_draws(tmp_path: Path, backend: str) -> None:
    before = tmp_path / "span.py"
    before.write_text(textwrap.dedent(SPAN_MASK).lstrip("\n"), encoding="utf-8")
    plain = _load(before)
    x = torch.linspace(-3.0, 3.0, 2 * 6 * 8).reshape(2, 6, 8)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(plain.step)(x)
    torch._dynamo.reset()
    frames = [f for r in explained.break_reasons for f in r.user_stack if Path(f.filename) == before]
    callers = [f.lineno for f in frames if "span_mask((batch" in (f.line or "")]
    assert callers, "the helper's caller must be on the recorded stack"
    features = compat.remedy_features()
    assert features.get("custom_op") is True, "torch 2.13 has torch.library.custom_op"
    offers = Offers(frozenset(name for name in HATCH_FEATURES if features.get(name) is True), frozenset({"step"}))
    caller = BreakSite(callers[0], "Attempted to call function marked as skipped", "", None, caller=True)
    found = {r.rule: r for r in rewrites_for(before.read_text(encoding="utf-8"), caller, offers)}
    assert "numpy-helper-op" in found, sorted(found)
    after = tmp_path / "span_op.py"
    after.write_text(found["numpy-helper-op"].source, encoding="utf-8")
    hatched = _load(after)
    np = pytest.importorskip("numpy")
    np.random.seed(0)
    expected = [plain.step(x) for _ in range(3)]  # three draws in a row, as eager makes them
    sum(e.sum() for e in expected).backward()
    torch._dynamo.reset()
    try:
        compiled = torch.compile(hatched.step, backend=backend, fullgraph=True)
        np.random.seed(0)
        outs = [compiled(x) for _ in range(3)]
        sum(o.sum() for o in outs).backward()
    finally:
        torch._dynamo.reset()
    assert all(torch.equal(o, e) for o, e in zip(outs, expected, strict=True))
    assert not torch.equal(expected[0], expected[1]), "the draws differ call to call: the test sees the stream"
    assert torch.allclose(hatched.MASKING.scale.grad, plain.MASKING.scale.grad)
