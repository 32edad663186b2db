"""numpy-helper-op (dynscope/rewrites/numpy_ops.py): a NumPy helper whose result its caller makes a tensor becomes
one torch.library.custom_op, written at the caller's line; its exact text, and where it declines. No torch import:
the run of the rewritten program (fullgraph, outputs and NumPy draws equal to eager) is
tests/integration/test_hatches_run.py's."""

from __future__ import annotations

from dynscope.rewrites import BreakSite, Offers
from dynscope.rewrites.catalogue import rewrites_for

OP = Offers(frozenset({"custom_op", "leaf_function"}), frozenset())

BEFORE = '''import numpy as np
import torch


def span_mask(shape: tuple[int, int], prob: float, length: int = 2, lengths: torch.LongTensor | None = None) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    starts = np.random.randint(0, shape[1] - length, size=shape[0])
    for row, start in enumerate(starts):
        mask[row, start : start + length] = np.random.rand() < prob
    return mask


class Masking(torch.nn.Module):
    def forward(self, hidden):
        batch, steps, width = hidden.shape
        if self.training:
            mask = span_mask((batch, steps), 0.9, lengths=None)
            mask = torch.tensor(mask, device=hidden.device, dtype=torch.bool)
            hidden = hidden.masked_fill(mask[..., None], 0.0)
        noise = torch.from_numpy(span_mask((batch, width), 0.5))
        return hidden * 2 + noise[:, None, :]
'''

AFTER = '''import numpy as np
import torch


def span_mask(shape: tuple[int, int], prob: float, length: int = 2, lengths: torch.LongTensor | None = None) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    starts = np.random.randint(0, shape[1] - length, size=shape[0])
    for row, start in enumerate(starts):
        mask[row, start : start + length] = np.random.rand() < prob
    return mask


@torch.library.custom_op(f"{__name__.replace('.', '_')}::span_mask", mutates_args=())
def _span_mask_op(shape: list[int], prob: float, length: int = 2, lengths: torch.Tensor | None = None) -> torch.Tensor:
    return torch.tensor(span_mask(tuple(shape), prob, length, lengths))


@_span_mask_op.register_fake
def _span_mask_op_fake(shape, prob, length=2, lengths=None):
    # the output's shape and dtype from one real call on the same numbers; NumPy's draws are put back
    state = np.random.get_state()
    try:
        out = torch.tensor(span_mask(tuple(int(v) for v in shape), float(prob), int(length), lengths))
    finally:
        np.random.set_state(state)
    return torch.empty(out.shape, dtype=out.dtype)


class Masking(torch.nn.Module):
    def forward(self, hidden):
        batch, steps, width = hidden.shape
        if self.training:
            mask = _span_mask_op((batch, steps), 0.9, lengths=None)
            mask = mask.to(device=hidden.device, dtype=torch.bool)
            hidden = hidden.masked_fill(mask[..., None], 0.0)
        noise = _span_mask_op((batch, width), 0.5)
        return hidden * 2 + noise[:, None, :]
'''

CALLER = BreakSite(17, "Attempted to call function marked as skipped", "", None, caller=True)


def _op(source: str, site: BreakSite = CALLER, offers: Offers = OP) -> str | None:
    return next((r.source for r in rewrites_for(source, site, offers) if r.rule == "numpy-helper-op"), None)


def test_the_exact_text_after_every_call_of_the_helper_that_is_made_a_tensor():
    assert _op(BEFORE) == AFTER


def test_it_is_offered_before_the_hatch_on_the_whole_caller_and_only_where_torch_has_custom_op():
    rules = [r.rule for r in rewrites_for(BEFORE, CALLER, OP)]
    assert rules[0] == "numpy-helper-op" and "leaf-method" in rules
    assert _op(BEFORE, offers=Offers(frozenset({"leaf_function"}), frozenset())) is None


def test_only_on_a_caller_line():
    assert _op(BEFORE, BreakSite(7, "", "")) is None


def test_a_parameter_the_schema_cannot_carry_declines():
    assert _op(BEFORE.replace("prob: float,", "prob,")) is None
    assert _op(BEFORE.replace("length: int = 2", "length=None")) is None
    assert _op(BEFORE.replace("length: int = 2", "*lengths")) is None


def test_an_unannotated_parameter_takes_the_type_of_its_number_default():
    after = _op(BEFORE.replace("length: int = 2", "length=2"))
    assert after is not None and "length: int = 2, lengths" in after


def test_an_array_read_again_after_its_conversion_is_left_as_it_is():
    kept = BEFORE.replace("            mask = torch.tensor(mask, device=hidden.device, dtype=torch.bool)\n",
                          "            tensor = torch.tensor(mask, device=hidden.device, dtype=torch.bool)\n"
                          "            print(mask.sum())\n")
    after = _op(kept)
    assert after is not None and "mask = span_mask((batch, steps), 0.9, lengths=None)" in after
    assert "noise = _span_mask_op((batch, width), 0.5)" in after


def test_a_conversion_with_other_keywords_is_left_as_it_is():
    kept = BEFORE.replace("torch.from_numpy(span_mask((batch, width), 0.5))",
                          "torch.tensor(span_mask((batch, width), 0.5), requires_grad=False)")
    after = _op(kept)
    assert after is not None and "torch.tensor(span_mask((batch, width), 0.5), requires_grad=False)" in after


def test_numpy_is_called_by_the_name_the_file_binds_it_to():
    after = _op(BEFORE.replace("import numpy as np\n", "import numpy\n").replace("np.", "numpy."))
    assert after is not None and "state = numpy.random.get_state()" in after and after.count("import numpy\n") == 1
