"""The rewrite catalogue on real torch.compile runs: a program breaks, torch names the line, the
catalogue rewrites the file, and the rewritten program compiles whole (fullgraph=True) with the
same outputs. The break site handed to the catalogue is the one torch reported, not one written here.

One small program per rule family, each compiled twice with backend="eager" (seconds each).
"""

from __future__ import annotations

import importlib.util
import re
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import torch

from dynscope.rewrites import BreakSite
from dynscope.rewrites.catalogue import rewrites_for

PROGRAMS = {
    "tensor-where": '''
        import torch

        def forward(x):
            if x.sum() > 0:
                y = x * 2
            else:
                y = x - 1
            return y + 1
        ''',
    "tensor-cond": '''
        import torch

        def forward(x):
            if x.sum() > 0:
                h = x.relu()
                y = h * 2
            else:
                y = x - 1
            return y + 1
        ''',
    "guard-to-check": '''
        import torch

        def forward(x):
            if (x > 100).any():
                raise ValueError("input out of range")
            return x * 3
        ''',
    "keep-tensor": '''
        import torch

        def forward(x):
            scale = x.abs().max().item()
            return x / scale + 1
        ''',
    "numpy-int-math": '''
        import numpy as np
        import torch

        def chunk_length(a, b):
            return np.lcm(a, b)

        def forward(x):
            chunk = chunk_length(2, 4)
            if x.shape[-1] % chunk != 0:
                return x + 1
            return x * 2
        ''',
    "drop-requires-grad": '''
        import torch

        def forward(x):
            y = x * 2
            y.requires_grad_()
            return y + 1
        ''',
    # HuBERT's feature encoder: the attribute form
    "drop-requires-grad-attribute": '''
        import torch

        class Encoder:
            training = True

        def forward(x, encoder=Encoder()):
            y = x * 2
            if encoder.training:
                y.requires_grad = True
            return y + 1
        ''',
    # SwitchTransformers' default mask, made only when not compiling
    "drop-compiling-clause": '''
        import torch

        def forward(x, mask=None):
            if mask is None and not torch.compiler.is_compiling():
                mask = torch.ones(4, x.shape[0])
            return x * mask[0]
        ''',
}


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_USER_FRAME = re.compile(r'File "(?P<file>[^"\n]+)", line (?P<line>\d+), in ')


def _run(path: Path, name: str, x: torch.Tensor) -> tuple[torch.Tensor, list[BreakSite], bool]:
    """The compiled program's output on ``x``, the breaks torch reports in ``path``, and whether it
    compiles whole (fullgraph=True). A frame torch skips whole (an exception it observed) reports
    no break; its line is then read from the fullgraph error, which names the user's frames."""
    forward = _load(path, name).forward
    torch._dynamo.reset()
    output = torch.compile(forward, backend="eager")(x)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(forward)(x)
    sites = []
    for reason in explained.break_reasons:
        frames = [frame for frame in reason.user_stack if Path(frame.filename) == path]
        if frames:
            headline, _, rest = reason.reason.partition("\n")
            sites.append(BreakSite(line=frames[-1].lineno, gb_type=headline, reason=rest or headline))
    torch._dynamo.reset()
    try:
        torch.compile(forward, backend="eager", fullgraph=True)(x)
    except Exception as error:  # torch's Unsupported: the break, as torch words it
        text = str(error)
        lines = [int(m.group("line")) for m in _USER_FRAME.finditer(text) if Path(m.group("file")) == path]
        if not sites and lines:
            headline, _, rest = text.partition("\n")
            sites.append(BreakSite(line=lines[-1], gb_type=headline, reason=rest))
        return output, sites, False
    finally:
        torch._dynamo.reset()
    return output, sites, True


@pytest.mark.parametrize("rule", sorted(PROGRAMS))
def test_the_rewrite_removes_the_break_torch_reported_with_equal_outputs(rule: str, tmp_path: Path) -> None:
    before = tmp_path / "before.py"
    before.write_text(textwrap.dedent(PROGRAMS[rule]).lstrip("\n"), encoding="utf-8")
    x = torch.linspace(-1.0, 2.0, 8)
    eager = _load(before, f"before_{rule.replace('-', '_')}").forward(x)

    compiled, sites, _whole = _run(before, f"before_c_{rule.replace('-', '_')}", x)
    assert sites, "the program must break before the rewrite"
    assert torch.allclose(compiled, eager)

    rule_name = rule.removesuffix("-attribute")
    candidates = {r.rule: r for r in rewrites_for(before.read_text(encoding="utf-8"), sites[0])}
    assert rule_name in candidates, f"{rule_name} did not answer {sites[0]}; got {sorted(candidates)}"

    after = tmp_path / "after.py"
    after.write_text(candidates[rule_name].source, encoding="utf-8")
    if candidates[rule_name].settings:
        pytest.fail("a rewrite that needs settings is not exercised here")
    rewritten, sites_after, whole_after = _run(after, f"after_{rule.replace('-', '_')}", x)
    assert sites_after == [] and whole_after, f"still breaks: {sites_after}"
    assert torch.allclose(rewritten, eager)


def _assert_port_answers(tmp_path: Path, source: str, stem: str, x: torch.Tensor, why: str) -> tuple[Path, Path]:
    """``source`` (a transformers text of the unit tests' fixtures plus a driver with ``forward``) breaks in
    ``forward(x)`` (``why``); the library-port answers that break, and the ported file compiles whole with
    bit-identical results. The files before and after the port."""
    before = tmp_path / f"{stem}_before.py"
    before.write_text(source, encoding="utf-8")
    eager = _load(before, f"{stem}_before").forward(x)

    _compiled, sites, _whole = _run(before, f"{stem}_before_c", x)
    assert sites, f"{why} must break before the port"
    candidates = {r.rule: r for r in rewrites_for(before.read_text(encoding="utf-8"), sites[0])}
    assert "library-port" in candidates, f"library-port did not answer {sites[0]}; got {sorted(candidates)}"

    after = tmp_path / f"{stem}_after.py"
    after.write_text(candidates["library-port"].source, encoding="utf-8")
    rewritten, sites_after, whole_after = _run(after, f"{stem}_after", x)
    assert sites_after == [] and whole_after, f"still breaks: {sites_after}"
    assert torch.equal(rewritten, eager)
    return before, after


def _port_fixtures():
    return _load(Path(__file__).parents[1] / "unit" / "test_library_ports.py", "library_port_fixtures")


def test_the_batch_frexp_port_compiles_whole_and_equals_numpy_and_decimal(tmp_path: Path) -> None:
    """library-port on IBert's batch_frexp (transformers 5.24's text, the unit tests' fixture): the break torch
    reports is answered by the port, which compiles whole and gives bit-identical results, ties included."""
    # m * 2**31 ends in .5 for these two (2**30 + .5, its negative): ROUND_HALF_UP goes away from zero, torch.round to even
    ties = torch.tensor([(2**31 + 1) / 2**32, -(2**31 + 1) / 2**30], dtype=torch.float64)
    x = torch.cat([torch.linspace(-1.0, 2.0, 8, dtype=torch.float64), ties])
    driver = "\n\ndef forward(x):\n    m, e = batch_frexp(x)\n    return torch.stack([m.double(), e])\n"
    _assert_port_answers(tmp_path, _port_fixtures().IBERT_FILE + driver, "ibert", x, "batch_frexp")


_REFORMER_DRIVER = '''

def _get_least_common_mult_chunk_len(config):
    return 8


def torch_compilable_check(cond, msg):  # transformers' check while tracing (utils/import_utils.py)
    torch._check(cond)


class _Config:
    axial_pos_shape = (4, 8)
    axial_pos_embds_dim = (4, 12)
    hidden_dropout_prob = 0.0
    hidden_size = 16


torch.manual_seed(0)
_EMBEDDINGS = AxialPositionEmbeddings(_Config()).eval()
for _weight in _EMBEDDINGS.weights:
    _weight.data.normal_()


def forward(position_ids):
    return _EMBEDDINGS(position_ids)
'''


def test_the_reformer_axial_port_compiles_whole_with_the_rows_the_cut_table_gives(tmp_path: Path) -> None:
    """The Reformer edit port (transformers 5.24's AxialPositionEmbeddings, the unit tests' fixture): the .item()
    break torch reports is answered by keeping the whole table, which compiles whole with bit-identical rows."""
    # ids short of the table (the cut keeps 3 of its 4 rows) and out of order: the rows read must still match
    ids = torch.tensor([[0, 5, 17, 3, 9, 2], [20, 1, 8, 8, 0, 11]])
    before, after = _assert_port_answers(tmp_path, _port_fixtures().REFORMER_FILE + _REFORMER_DRIVER, "reformer", ids,
                                         "the axial table's cut")
    # ids up to the table's last entry (no cut in the original): the same rows again
    every = torch.tensor([[31, 0, 24, 7, 30, 15], [1, 2, 3, 29, 28, 27]])
    torch._dynamo.reset()
    compiled_every = torch.compile(_load(after, "reformer_after_every").forward, backend="eager", fullgraph=True)(every)
    torch._dynamo.reset()
    assert torch.equal(compiled_every, _load(before, "reformer_before_every").forward(every))


_BIGBIRD_DRIVER = '''

_ATTENTION = BigBirdPegasusBlockSparseAttention().eval()


def forward(x):
    # as bigbird_block_sparse_attention calls it, with _get_rand_attn_plan's plan for 64 tokens, blocks of 4, 2 random blocks
    rand_attn = _ATTENTION._bigbird_block_rand_mask_with_head(
        from_seq_length=64, to_seq_length=64, from_block_size=4, to_block_size=4, num_heads=2,
        plan_from_length=[36, 64], plan_num_rand_blocks=[2, 0],
    )
    rand_attn = torch.tensor(np.stack(rand_attn, axis=0), dtype=torch.long)
    return torch.cat([x, rand_attn.flatten(), torch.tensor(rand_attn.shape)])  # the values and the shape
'''


def test_the_bigbird_plan_port_compiles_whole_with_the_same_mask(tmp_path: Path) -> None:
    """The BigBird(-Pegasus) edit port (transformers 5.24's _bigbird_block_rand_mask_with_head, the unit tests'
    fixture): np.sum's NumPy integer made np.zeros' size a tensor; with sum() the helper compiles whole, same mask."""
    _assert_port_answers(tmp_path, _port_fixtures().BIGBIRD_FILE + _BIGBIRD_DRIVER, "bigbird", torch.arange(4),
                         "np.zeros with np.sum's size")


# what the capture_outputs fixture (transformers 5.24's output_capturing.py, the decorator alone) needs from its module
_OUTPUTS_STUBS = '''
from contextvars import ContextVar

import torch


class _CanRecordRegistry(dict):
    def __setitem__(self, model, can_record_outputs):
        super().__setitem__(str(model.__class__), can_record_outputs)

    def get(self, model):
        return super().get(str(model.__class__)) or {}


_CAN_RECORD_REGISTRY = _CanRecordRegistry()


class _CompileableContextVar:  # as output_capturing.py has it: a plain global while compiling
    def __init__(self, name):
        self.context_var = ContextVar(name, default=None)
        self.global_var = None
        self.compiling = False

    def set(self, value):
        if torch.compiler.is_compiling():
            self.global_var = value
            self.compiling = True
            return None
        return self.context_var.set(value)

    def reset(self, token):
        if self.compiling or token is None:
            self.global_var = None
            self.compiling = False
        else:
            self.context_var.reset(token)


_active_collector = _CompileableContextVar("output_collector")


def selected_hidden_states(output_hidden_states):
    return None


def resolve_hidden_states_indices(model, selected):
    return set(selected)


def maybe_install_capturing_hooks(model):
    pass

'''

_OUTPUTS_DRIVER = '''

class _Config:
    return_dict = True
    output_hidden_states = False
    output_attentions = False


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = _Config()
        self.weight = torch.nn.Parameter(torch.ones(3))

    @capture_outputs
    def forward(self, x, **kwargs):
        y = x * self.weight
        torch._dynamo.graph_break()  # a break under the wrapper's try/finally: the wrapper runs in eager
        return {"last_hidden_state": y + 1}


_MODEL = _Model()
_CAN_RECORD_REGISTRY[_MODEL] = {"hidden_states": "_Layer", "attentions": "_Attention"}


def forward(x):
    return _MODEL(x, output_attentions=True)["last_hidden_state"]
'''


def _breaks(path: Path, name: str, x: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
    """The compiled program's output, and the reasons of the breaks torch counted on its first call: resumed ones
    ("graph_break") and those that sent a whole frame to eager ("unimplemented": the break under a try/finally)."""
    forward = _load(path, name).forward
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    try:
        output = torch.compile(forward, backend="eager")(x)
        counted = [*torch._dynamo.utils.counters["graph_break"].items(), *torch._dynamo.utils.counters["unimplemented"].items()]
        return output, [reason for reason, n in counted for _ in range(n)]
    finally:
        torch._dynamo.reset()


def test_the_capture_outputs_port_removes_the_dict_keyiterator_break(tmp_path: Path) -> None:
    """The capture_outputs edit port (transformers 5.24's wrapper, the unit tests' fixture): a break under the
    wrapper's try/finally sends it to eager, its dict comprehension is traced alone on a dict_keyiterator
    (Missing tp_iternext); over tuple(capturable_flags) that break is gone, the others and the output the same."""
    fixtures = _load(Path(__file__).parents[1] / "unit" / "test_library_ports.py", "library_port_fixtures")
    before = tmp_path / "outputs_before.py"
    before.write_text(_OUTPUTS_STUBS + fixtures.OUTPUT_CAPTURING + _OUTPUTS_DRIVER, encoding="utf-8")
    x = torch.arange(3.0)
    eager = _load(before, "outputs_before").forward(x)

    compiled, reasons = _breaks(before, "outputs_before_c", x)
    iternext = [r for r in reasons if "tp_iternext" in r or "dict_keyiterator" in r]
    assert len(iternext) == 1, f"the comprehension over the dict must break once before the port: {reasons}"
    line = next(n for n, text in enumerate(before.read_text(encoding="utf-8").splitlines(), 1) if "recordable_keys = {" in text)
    candidates = {r.rule: r for r in rewrites_for(before.read_text(encoding="utf-8"), BreakSite(line, "Missing tp_iternext", ""))}
    assert "library-port" in candidates, f"library-port did not answer line {line}; got {sorted(candidates)}"

    after = tmp_path / "outputs_after.py"
    after.write_text(candidates["library-port"].source, encoding="utf-8")
    rewritten, reasons_after = _breaks(after, "outputs_after", x)
    assert not [r for r in reasons_after if "tp_iternext" in r or "dict_keyiterator" in r], reasons_after
    assert len(reasons_after) == len(reasons) - 1, (reasons, reasons_after)  # only that break went
    assert torch.equal(compiled, eager) and torch.equal(rewritten, eager)
