"""library-port (dynscope/rewrites/library_ports.py): whole-function ports fire only on the exact code they were written for.

The fixtures are the functions' text copied from transformers 5.24 (ibert/quant_modules.py:704-735,
dbrx/modeling_dbrx.py:272-308, switch_transformers/modeling_switch_transformers.py:161-180), so these
tests do not depend on the installed transformers.
"""

from __future__ import annotations

import pytest

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.catalogue import RULES, rewrites_for
from dynscope.rewrites.library_ports import PORTS, fingerprint_of_source

BATCH_FREXP = '''\
def batch_frexp(inputs, max_bit=31):
    """
    Decompose the scaling factor into mantissa and twos exponent.

    Args:
        scaling_factor (`torch.Tensor`):
            Target scaling factor to decompose.

    Returns:
        ``Tuple(torch.Tensor, torch.Tensor)`: mantisa and exponent
    """

    shape_of_input = inputs.size()

    # trans the input to be a 1-d tensor
    inputs = inputs.view(-1)

    output_m, output_e = np.frexp(inputs.cpu().numpy())
    tmp_m = []
    for m in output_m:
        int_m_shifted = int(
            decimal.Decimal(m * (2**max_bit)).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP)
        )
        tmp_m.append(int_m_shifted)
    output_m = np.array(tmp_m)

    output_e = float(max_bit) - output_e

    return (
        torch.from_numpy(output_m).to(inputs.device).view(shape_of_input),
        torch.from_numpy(output_e).to(inputs.device).view(shape_of_input),
    )
'''

DBRX_EXPERTS = '''\
class DbrxExperts(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.mlp = DbrxExpertGLU(config)
        self.hidden_size = config.hidden_size
        self.ffn_hidden_size = config.ffn_hidden_size
        self.num_experts = config.moe_num_experts

    def forward(
        self,
        hidden_states: torch.Tensor,
        top_k_index: torch.Tensor,
        top_k_weights: torch.Tensor,
    ) -> torch.Tensor:
        batch_size = hidden_states.shape[0]
        hidden_states = hidden_states.reshape(-1, self.hidden_size)

        next_states = torch.zeros_like(hidden_states, dtype=hidden_states.dtype, device=hidden_states.device)
        with torch.no_grad():
            expert_mask = torch.nn.functional.one_hot(top_k_index, num_classes=self.num_experts + 1)
            expert_mask = expert_mask.permute(2, 1, 0)
            expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()

        split_expert_shape = (-1, self.ffn_hidden_size, self.hidden_size)
        for expert_idx in expert_hit:
            expert_idx = expert_idx[0]
            with torch.no_grad():
                idx, token_idx = torch.where(expert_mask[expert_idx])
            v1 = self.mlp.v1.view(split_expert_shape)[expert_idx]
            w1 = self.mlp.w1.view(split_expert_shape)[expert_idx]
            w2 = self.mlp.w2.view(split_expert_shape)[expert_idx]
            states = self.mlp(hidden_states[token_idx], w1, v1, w2)
            states = states.view(-1, self.hidden_size) * top_k_weights[token_idx, idx, None]
            next_states.index_add_(0, token_idx, states)

        next_states = next_states.view(batch_size, -1, self.hidden_size)
        return next_states
'''

SWITCH_EXPERTS = '''\
class SwitchTransformersExperts(nn.ModuleDict):
    def __init__(self, config: SwitchTransformersConfig):
        super().__init__()
        self.num_experts = config.num_experts
        for idx in range(config.num_experts):
            self[f"expert_{idx}"] = SwitchTransformersDenseActDense(config)

    def forward(
        self, hidden_states: torch.Tensor, selected_experts: torch.Tensor, routing_weights: torch.Tensor
    ) -> torch.Tensor:
        final_hidden_states = torch.zeros_like(hidden_states)
        expert_mask = selected_experts.permute(2, 1, 0)

        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current_state = hidden_states[None, top_x].reshape(-1, hidden_states.shape[-1])
            current_hidden_states = self[f"expert_{expert_idx[0]}"](current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        return final_hidden_states
'''

IBERT_FILE = "import decimal\n\nimport numpy as np\nimport torch\n\n\n" + BATCH_FREXP + """

def caller(scale):
    m, e = batch_frexp(scale)
    return m, e
"""
DBRX_FILE = "import torch\nfrom torch import nn\n\n\n" + DBRX_EXPERTS
SWITCH_FILE = "import torch\nfrom torch import nn\n\n\n" + SWITCH_EXPERTS

NUMPY_BREAK = "Attempted to call function marked as skipped"
NONZERO_BREAK = "Dynamic shape operator"


def line_of(source: str, text: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


def port(source: str, line: int, gb_type: str = "") -> Rewrite | None:
    found = [r for r in rewrites_for(source, BreakSite(line, gb_type, "")) if r.rule == "library-port"]
    return found[0] if found else None


def test_the_port_is_registered_first() -> None:
    # fix tries only the first few candidates of a break: the exact port must be one of them
    assert RULES[0][0] == "library-port"


@pytest.mark.parametrize(("original", "qualname"), [
    (BATCH_FREXP, "batch_frexp"),
    (DBRX_EXPERTS.split("    def forward(", 1)[1], "DbrxExperts.forward"),
    (SWITCH_EXPERTS.split("    def forward(", 1)[1], "SwitchTransformersExperts.forward"),
], ids=["ibert", "dbrx", "switch"])
def test_each_fingerprint_is_the_one_of_the_transformers_code(original: str, qualname: str) -> None:
    function = original if original.startswith("def ") else "def forward(" + original
    assert {p.qualname: p.fingerprint for p in PORTS}[qualname] == fingerprint_of_source(function)


def test_batch_frexp_is_ported_keeping_its_def_and_docstring() -> None:
    rewrite = port(IBERT_FILE, line_of(IBERT_FILE, "np.frexp"), NUMPY_BREAK)
    assert rewrite is not None
    doc_end = BATCH_FREXP.index('"""\n\n') + 5  # the blank line after the docstring stays
    expected_function = BATCH_FREXP[:doc_end] + """    shape_of_input = inputs.size()
    inputs = inputs.view(-1)
    output_m, output_e = torch.frexp(inputs)
    # decimal's ROUND_HALF_UP: ties away from zero (torch.round rounds them to even); exact in float64
    shifted = output_m.to(torch.float64) * (2**max_bit)
    output_m = (torch.sign(shifted) * torch.floor(torch.abs(shifted) + 0.5)).to(torch.int64)
    output_e = float(max_bit) - output_e.to(torch.float64)
    return output_m.view(shape_of_input), output_e.view(shape_of_input)
"""
    assert rewrite.source == IBERT_FILE.replace(BATCH_FREXP, expected_function)
    compile(rewrite.source, "<ported>", "exec")
    # torch's label ("marked as skipped") hides the cause: the port names it
    assert "NumPy and decimal" in rewrite.cause
    assert rewrite.title.startswith("port batch_frexp() from NumPy and decimal to torch")


def test_batch_frexp_is_ported_from_its_decimal_loop_and_from_a_call_into_it() -> None:
    for text in ("decimal.Decimal(m", "m, e = batch_frexp(scale)"):
        rewrite = port(IBERT_FILE, line_of(IBERT_FILE, text))
        assert rewrite is not None, text
        assert "np.frexp" not in rewrite.source and "def caller(scale):\n    m, e = batch_frexp(scale)" in rewrite.source


def test_a_break_outside_the_function_gets_no_port() -> None:
    assert port(IBERT_FILE, line_of(IBERT_FILE, "return m, e")) is None
    assert port(IBERT_FILE, line_of(IBERT_FILE, "import decimal")) is None


@pytest.mark.parametrize(("before", "after"), [
    ("max_bit=31", "max_bit=32"),  # the def line counts
    ("rounding=decimal.ROUND_HALF_UP", "rounding=decimal.ROUND_HALF_EVEN"),
    ("output_e = float(max_bit) - output_e", "output_e = float(max_bit) + output_e"),
])
def test_batch_frexp_changed_by_one_token_is_left_alone(before: str, after: str) -> None:
    changed = IBERT_FILE.replace(before, after, 1)
    assert changed != IBERT_FILE
    assert port(changed, line_of(changed, "np.frexp"), NUMPY_BREAK) is None


def test_comments_blank_lines_and_decorators_do_not_change_the_fingerprint() -> None:
    edited = IBERT_FILE.replace("def batch_frexp(", "@torch.compiler.disable\ndef batch_frexp(").replace(
        "    tmp_m = []\n", "    # the mantissas, one by one\n\n    tmp_m = []  # shifted\n")
    rewrite = port(edited, line_of(edited, "np.frexp"), NUMPY_BREAK)
    assert rewrite is not None
    assert "@torch.compiler.disable\ndef batch_frexp(inputs, max_bit=31):" in rewrite.source
    assert "tmp_m" not in rewrite.source


def test_a_method_named_like_a_ported_function_is_left_alone() -> None:
    method = "import torch\n\n\nclass Quant:\n" + "".join(f"    {line}" for line in BATCH_FREXP.splitlines(True))
    assert port(method, line_of(method, "np.frexp"), NUMPY_BREAK) is None


@pytest.mark.parametrize(("source", "cls"), [(DBRX_FILE, "DbrxExperts"), (SWITCH_FILE, "SwitchTransformersExperts")],
                         ids=["dbrx", "switch"])
def test_the_moe_expert_loop_runs_every_expert_densely(source: str, cls: str) -> None:
    rewrite = port(source, line_of(source, ".nonzero()"), NONZERO_BREAK)
    assert rewrite is not None
    compile(rewrite.source, "<ported>", "exec")
    after = rewrite.source
    assert "nonzero" not in after and "index_add_" not in after and "torch.where" not in after
    assert "for expert_idx in range(self.num_experts):" in after
    # the def line (with its annotations) and the class's __init__ stay as they were
    def_line = source[source.index("    def forward("):source.index(") -> torch.Tensor:") + len(") -> torch.Tensor:")]
    assert def_line in after and source.split("    def forward(")[0] == after.split("    def forward(")[0]
    assert rewrite.title.startswith(f"run {cls}.forward dense, without nonzero: every expert runs on every token: E× the expert FLOPs")
    assert rewrite.cause.startswith("a loop over the experts a data-dependent nonzero picks")


def test_the_moe_loop_fires_from_inside_the_loop_too() -> None:
    assert port(DBRX_FILE, line_of(DBRX_FILE, "idx, token_idx = torch.where")) is not None


@pytest.mark.parametrize(("source", "before", "after"), [
    (DBRX_FILE, "num_classes=self.num_experts + 1", "num_classes=self.num_experts"),
    (SWITCH_FILE, "routing_weights[top_x, idx, None]", "routing_weights[top_x, 0, None]"),
], ids=["dbrx", "switch"])
def test_a_moe_loop_changed_by_one_token_is_left_alone(source: str, before: str, after: str) -> None:
    changed = source.replace(before, after, 1)
    assert changed != source
    assert port(changed, line_of(changed, ".nonzero()"), NONZERO_BREAK) is None


def test_the_same_forward_in_another_class_is_left_alone() -> None:
    renamed = SWITCH_FILE.replace("class SwitchTransformersExperts(", "class MyExperts(")
    assert port(renamed, line_of(renamed, ".nonzero()"), NONZERO_BREAK) is None
