"""library-port (dynscope/rewrites/library_ports.py): whole-function ports fire only on the exact code they were written for.

The fixtures are the functions' text copied from transformers 5.24 (ibert/quant_modules.py:704-735,
dbrx/modeling_dbrx.py:272-308, switch_transformers/modeling_switch_transformers.py:161-180,
encodec/modeling_encodec.py:82-176, bigbird_pegasus/modeling_bigbird_pegasus.py:833-970,
reformer/modeling_reformer.py:193-296, utils/output_capturing.py:310-392), so these tests do not
depend on the installed transformers.
"""

from __future__ import annotations

import math

import libcst as cst
import pytest

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.catalogue import RULES, rewrites_for
from dynscope.rewrites.library_ports import PORTS, fingerprint, fingerprint_of_source
from dynscope.rewrites.locate import nodes_of_kind

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

ENCODEC_CONV1D = '''\
class EncodecConv1d(nn.Module):
    """Conv1d with asymmetric or causal padding and normalization."""

    def __init__(
        self, config, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, dilation: int = 1
    ):
        super().__init__()
        self.causal = config.use_causal_conv
        self.pad_mode = config.pad_mode
        self.norm_type = config.norm_type

        if self.norm_type not in ["weight_norm", "time_group_norm"]:
            raise ValueError(
                f'self.norm_type must be one of `"weight_norm"`, `"time_group_norm"`), got {self.norm_type}'
            )

        # warn user on unusual setup between dilation and stride
        if stride > 1 and dilation > 1:
            logger.warning(
                "EncodecConv1d has been initialized with stride > 1 and dilation > 1"
                f" (kernel_size={kernel_size} stride={stride}, dilation={dilation})."
            )

        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride, dilation=dilation)
        weight_norm = nn.utils.weight_norm
        if hasattr(nn.utils.parametrizations, "weight_norm"):
            weight_norm = nn.utils.parametrizations.weight_norm

        if self.norm_type == "weight_norm":
            self.conv = weight_norm(self.conv)
        elif self.norm_type == "time_group_norm":
            self.norm = nn.GroupNorm(1, out_channels)

        kernel_size = self.conv.kernel_size[0]
        stride = torch.tensor(self.conv.stride[0], dtype=torch.int64)
        dilation = self.conv.dilation[0]

        # Effective kernel size with dilations.
        kernel_size = torch.tensor((kernel_size - 1) * dilation + 1, dtype=torch.int64)

        self.stride = nn.Buffer(stride, persistent=False)
        self.kernel_size = nn.Buffer(kernel_size, persistent=False)
        self.padding_total = nn.Buffer(kernel_size - stride, persistent=False)

    def _get_extra_padding_for_conv1d(
        self,
        hidden_states: torch.Tensor,
    ) -> torch.Tensor:
        """See `pad_for_conv1d`."""
        length = hidden_states.shape[-1]
        n_frames = (length - self.kernel_size + self.padding_total) / self.stride + 1
        n_frames = torch.ceil(n_frames).to(torch.int64) - 1
        ideal_length = n_frames * self.stride + self.kernel_size - self.padding_total

        return ideal_length - length

    @staticmethod
    def _pad1d(hidden_states: torch.Tensor, paddings: tuple[int, int], mode: str = "zero", value: float = 0.0):
        """Tiny wrapper around torch.nn.functional.pad, just to allow for reflect padding on small input.
        If this is the case, we insert extra 0 padding to the right before the reflection happens.
        """
        length = hidden_states.shape[-1]
        padding_left, padding_right = paddings
        if mode != "reflect":
            return nn.functional.pad(hidden_states, paddings, mode, value)

        max_pad = max(padding_left, padding_right)
        extra_pad = 0
        if length <= max_pad:
            extra_pad = max_pad - length + 1
            hidden_states = nn.functional.pad(hidden_states, (0, extra_pad))
        padded = nn.functional.pad(hidden_states, paddings, mode, value)
        end = padded.shape[-1] - extra_pad
        return padded[..., :end]

    def forward(self, hidden_states):
        extra_padding = self._get_extra_padding_for_conv1d(hidden_states)

        if self.causal:
            # Left padding for causal
            hidden_states = self._pad1d(hidden_states, (self.padding_total, extra_padding), mode=self.pad_mode)
        else:
            # Asymmetric padding required for odd strides
            padding_right = self.padding_total // 2
            padding_left = self.padding_total - padding_right
            hidden_states = self._pad1d(
                hidden_states, (padding_left, padding_right + extra_padding), mode=self.pad_mode
            )

        hidden_states = self.conv(hidden_states)

        if self.norm_type == "time_group_norm":
            hidden_states = self.norm(hidden_states)

        return hidden_states
'''

IBERT_FILE = "import decimal\n\nimport numpy as np\nimport torch\n\n\n" + BATCH_FREXP + """

def caller(scale):
    m, e = batch_frexp(scale)
    return m, e
"""
DBRX_FILE = "import torch\nfrom torch import nn\n\n\n" + DBRX_EXPERTS
SWITCH_FILE = "import torch\nfrom torch import nn\n\n\n" + SWITCH_EXPERTS
ENCODEC_FILE = "import torch\nfrom torch import nn\n\n\n" + ENCODEC_CONV1D

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


def _method(source: str, name: str) -> str:
    """The text of one method of the fixture class, dedented to a top-level def."""
    lines = source.splitlines(True)
    start = next(i for i, line in enumerate(lines) if line.startswith(f"    def {name}("))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("    def ", "    @"))), len(lines))
    return "".join(line[4:] for line in lines[start:end])


@pytest.mark.parametrize("name", ["forward", "__init__", "_get_extra_padding_for_conv1d"])
def test_the_encodec_fingerprints_are_those_of_the_transformers_code(name: str) -> None:
    port = {p.qualname: p for p in PORTS}["EncodecConv1d.forward"]
    fingerprints = {"EncodecConv1d.forward": port.fingerprint, **dict(port.relies_on)}
    assert fingerprints[f"EncodecConv1d.{name}"] == fingerprint_of_source(_method(ENCODEC_CONV1D, name))


@pytest.mark.parametrize("text", ["if length <= max_pad:", "n_frames = torch.ceil(n_frames)", "extra_padding = self._get_extra"])
def test_encodec_padding_is_ported_to_python_ints_from_a_break_in_its_helpers(text: str) -> None:
    # the break is in _pad1d (a branch on the tensor paddings); the cause is what forward hands it
    rewrite = port(ENCODEC_FILE, line_of(ENCODEC_FILE, text), "Data-dependent branching")
    assert rewrite is not None
    compile(rewrite.source, "<ported>", "exec")
    forward = _method(rewrite.source, "forward")
    assert "self.padding_total" not in forward and "self._get_extra_padding_for_conv1d" not in forward
    assert "stride = self.conv.stride[0]" in forward and "n_frames = -((kernel_size - padding_total - length) // stride)" in forward
    # only forward changes: __init__ (the buffers), the helpers and the def line stay
    for name in ("__init__", "_get_extra_padding_for_conv1d", "_pad1d"):
        assert _method(rewrite.source, name) == _method(ENCODEC_FILE, name)
    assert "padding arithmetic on constant int64 buffers" in rewrite.cause


def _extra_padding_as_ported(length: int, kernel_size: int, stride: int, dilation: int) -> int:
    """The port's integer arithmetic, run here on plain ints (its body's lines, executed)."""
    forward = _method(port(ENCODEC_FILE, line_of(ENCODEC_FILE, "if length <= max_pad:")).source, "forward")  # type: ignore[union-attr]
    lines = [line.strip() for line in forward.splitlines()[1:] if line.strip() and not line.strip().startswith("#")]
    arithmetic = "\n".join(lines[: lines.index("extra_padding = n_frames * stride + kernel_size - padding_total - length") + 1])
    conv = type("Conv", (), {"kernel_size": (kernel_size,), "stride": (stride,), "dilation": (dilation,)})()
    shape = type("Shape", (), {"shape": (length,)})()
    scope: dict[str, object] = {"self": type("Self", (), {"conv": conv})(), "hidden_states": shape}
    exec(arithmetic, scope)  # the port's own text, from this test's fixture
    extra = scope["extra_padding"]
    assert isinstance(extra, int)
    return extra


@pytest.mark.parametrize(("length", "kernel_size", "stride", "dilation"),
                         [(64, 7, 1, 1), (64, 4, 2, 1), (33, 4, 2, 1), (17, 3, 1, 2), (100, 8, 4, 1), (5, 7, 3, 1), (1, 2, 2, 1)])
def test_encodec_integer_padding_equals_the_float_formula(length: int, kernel_size: int, stride: int, dilation: int) -> None:
    # the original: ceil((length - k + padding_total) / stride + 1) - 1 frames, k the dilated kernel
    k = (kernel_size - 1) * dilation + 1
    padding_total = k - stride
    n_frames = math.ceil((length - k + padding_total) / stride + 1) - 1
    expected = n_frames * stride + k - padding_total - length
    assert _extra_padding_as_ported(length, kernel_size, stride, dilation) == expected


@pytest.mark.parametrize(("function", "before", "after"), [
    ("forward", "padding_right = self.padding_total // 2", "padding_right = self.padding_total // 3"),
    ("__init__", "kernel_size - stride, persistent=False", "kernel_size + stride, persistent=False"),
    ("_get_extra_padding_for_conv1d", "torch.ceil(n_frames)", "torch.floor(n_frames)"),
])
def test_encodec_changed_by_one_token_in_what_the_port_relies_on_is_left_alone(function: str, before: str, after: str) -> None:
    changed = ENCODEC_FILE.replace(before, after, 1)
    assert changed != ENCODEC_FILE and _method(changed, function) != _method(ENCODEC_FILE, function)
    assert port(changed, line_of(changed, "if length <= max_pad:"), "Data-dependent branching") is None


def test_a_break_elsewhere_in_the_encodec_class_gets_no_port() -> None:
    assert port(ENCODEC_FILE, line_of(ENCODEC_FILE, "weight_norm = nn.utils.weight_norm")) is None


BIGBIRD_FILE = '''\
import numpy as np
import torch
from torch import nn


class BigBirdPegasusBlockSparseAttention(nn.Module):
    def _bigbird_block_rand_mask_with_head(
        self,
        from_seq_length,
        to_seq_length,
        from_block_size,
        to_block_size,
        num_heads,
        plan_from_length,
        plan_num_rand_blocks,
        window_block_left=1,
        window_block_right=1,
        global_block_top=1,
        global_block_bottom=1,
        global_block_left=1,
        global_block_right=1,
    ):
        """
        Create adjacency list of random attention.

        Args:
            from_seq_length: int. length of from sequence.
            to_seq_length: int. length of to sequence.
            from_block_size: int. size of block in from sequence.
            to_block_size: int. size of block in to sequence.
            num_heads: int. total number of heads.
            plan_from_length: list. plan from length where num_random_blocks are chosen from.
            plan_num_rand_blocks: list. number of rand blocks within the plan.
            window_block_left: int. number of blocks of window to left of a block.
            window_block_right: int. number of blocks of window to right of a block.
            global_block_top: int. number of blocks at the top.
            global_block_bottom: int. number of blocks at the bottom.
            global_block_left: int. Number of blocks globally used to the left.
            global_block_right: int. Number of blocks globally used to the right.

        Returns:
            adjacency list of size num_head where each element is of size from_seq_length//from_block_size-2 by
            num_rand_blocks
        """
        # using this method when from_seq_length not in [1024, 3072, 4096]

        if from_seq_length // from_block_size != to_seq_length // to_block_size:
            raise ValueError("Error the number of blocks needs to be same!")

        if from_seq_length not in plan_from_length:
            raise ValueError("Error from sequence length not in plan!")

        # Total number of blocks in the mmask
        num_blocks = from_seq_length // from_block_size
        # Number of blocks per plan
        plan_block_length = np.array(plan_from_length) // from_block_size
        # till when to follow plan
        max_plan_idx = plan_from_length.index(from_seq_length)

        # Random Attention adjacency list
        rand_attn = [
            np.zeros((num_blocks, np.sum(plan_num_rand_blocks[: max_plan_idx + 1])), dtype=np.int32)
            for i in range(num_heads)
        ]
        # During inference (eval) no randomness
        if not self.training:
            for nh in range(num_heads):
                rand_attn[nh] = rand_attn[nh][global_block_top : num_blocks - global_block_bottom, :]
            return rand_attn

        # We will go iteratively over the plan blocks and pick random number of
        # Attention blocks from the legally allowed blocks
        for plan_idx in range(max_plan_idx + 1):
            rnd_r_cnt = 0
            if plan_idx > 0:
                # set the row for all from_blocks starting from 0 to
                # plan_block_length[plan_idx-1]
                # column index start from plan_block_length[plan_idx-1] and ends at
                # plan_block_length[plan_idx]
                if plan_num_rand_blocks[plan_idx] > 0:
                    rnd_r_cnt = int(np.sum(plan_num_rand_blocks[:plan_idx]))
                    curr_r_cnt = int(np.sum(plan_num_rand_blocks[: plan_idx + 1]))
                    for blk_rw_idx in range(global_block_top, plan_block_length[plan_idx - 1]):
                        for h in range(num_heads):
                            rand_attn[h][blk_rw_idx, rnd_r_cnt:curr_r_cnt] = self._get_single_block_row_attention(
                                block_id=blk_rw_idx,
                                to_start_block_id=plan_block_length[plan_idx - 1],
                                to_end_block_id=plan_block_length[plan_idx],
                                num_rand_blocks=plan_num_rand_blocks[plan_idx],
                                window_block_left=window_block_left,
                                window_block_right=window_block_right,
                                global_block_left=global_block_left,
                                global_block_right=global_block_right,
                            )

                for pl_id in range(plan_idx):
                    if plan_num_rand_blocks[pl_id] == 0:
                        continue
                    for blk_rw_idx in range(plan_block_length[plan_idx - 1], plan_block_length[plan_idx]):
                        rnd_r_cnt = 0
                        to_start_block_id = 0
                        if pl_id > 0:
                            rnd_r_cnt = int(np.sum(plan_num_rand_blocks[:pl_id]))
                            to_start_block_id = plan_block_length[pl_id - 1]
                        curr_r_cnt = int(np.sum(plan_num_rand_blocks[: pl_id + 1]))
                        for h in range(num_heads):
                            rand_attn[h][blk_rw_idx, rnd_r_cnt:curr_r_cnt] = self._get_single_block_row_attention(
                                block_id=blk_rw_idx,
                                to_start_block_id=to_start_block_id,
                                to_end_block_id=plan_block_length[pl_id],
                                num_rand_blocks=plan_num_rand_blocks[pl_id],
                                window_block_left=window_block_left,
                                window_block_right=window_block_right,
                                global_block_left=global_block_left,
                                global_block_right=global_block_right,
                            )

            if plan_num_rand_blocks[plan_idx] == 0:
                continue
            curr_r_cnt = int(np.sum(plan_num_rand_blocks[: plan_idx + 1]))
            from_start_block_id = global_block_top
            to_start_block_id = 0
            if plan_idx > 0:
                rnd_r_cnt = int(np.sum(plan_num_rand_blocks[:plan_idx]))
                from_start_block_id = plan_block_length[plan_idx - 1]
                to_start_block_id = plan_block_length[plan_idx - 1]

            for blk_rw_idx in range(from_start_block_id, plan_block_length[plan_idx]):
                for h in range(num_heads):
                    rand_attn[h][blk_rw_idx, rnd_r_cnt:curr_r_cnt] = self._get_single_block_row_attention(
                        block_id=blk_rw_idx,
                        to_start_block_id=to_start_block_id,
                        to_end_block_id=plan_block_length[plan_idx],
                        num_rand_blocks=plan_num_rand_blocks[plan_idx],
                        window_block_left=window_block_left,
                        window_block_right=window_block_right,
                        global_block_left=global_block_left,
                        global_block_right=global_block_right,
                    )

        for nh in range(num_heads):
            rand_attn[nh] = rand_attn[nh][global_block_top : num_blocks - global_block_bottom, :]

        return rand_attn
'''


def test_the_bigbird_fingerprint_is_the_one_of_the_transformers_code() -> None:
    ports = {p.qualname: p for p in PORTS}
    # taken in its class (its docstring's indentation is part of its text)
    expected, = (fingerprint(node) for node, _span in nodes_of_kind(cst.parse_module(BIGBIRD_FILE), cst.FunctionDef))
    # one method, word for word, in BigBird-Pegasus and BigBird
    assert ports["BigBirdPegasusBlockSparseAttention._bigbird_block_rand_mask_with_head"].fingerprint == expected
    assert ports["BigBirdBlockSparseAttention._bigbird_block_rand_mask_with_head"].fingerprint == expected


def test_bigbird_np_sum_of_the_plan_becomes_sum_and_nothing_else_changes() -> None:
    line = line_of(BIGBIRD_FILE, "np.zeros((num_blocks, np.sum(")
    rewrite = port(BIGBIRD_FILE, line, "Data dependent operator")
    assert rewrite is not None
    expected = BIGBIRD_FILE.replace("np.zeros((num_blocks, np.sum(plan_num_rand_blocks[: max_plan_idx + 1])), dtype=np.int32)",
                                    "np.zeros((num_blocks, (np.sum(plan_num_rand_blocks[: max_plan_idx + 1]) if "
                                    "self.training else sum(plan_num_rand_blocks[: max_plan_idx + 1]))), dtype=np.int32)")
    assert expected != BIGBIRD_FILE and rewrite.source == expected  # one expression, the rest byte for byte
    assert "NumPy integer" in rewrite.cause and rewrite.title.startswith("use sum() instead of np.sum()")
    # the same method in BigBird's class
    bigbird = BIGBIRD_FILE.replace("class BigBirdPegasusBlockSparseAttention(", "class BigBirdBlockSparseAttention(")
    assert port(bigbird, line, "Data dependent operator") is not None


def test_bigbird_sum_and_np_sum_agree_on_the_plan() -> None:
    # the plan _get_rand_attn_plan builds is a list of Python ints: sum() gives np.sum()'s value, as an int
    np = pytest.importorskip("numpy")
    for plan in ([2, 0], [1, 1], [3], [0]):
        for end in range(1, len(plan) + 1):
            assert sum(plan[:end]) == np.sum(plan[:end]) and type(sum(plan[:end])) is int


@pytest.mark.parametrize(("before", "after"), [
    ("plan_num_rand_blocks[: max_plan_idx + 1]", "plan_num_rand_blocks[:max_plan_idx]"),
    ("if not self.training:", "if self.training:"),
    ("global_block_top : num_blocks - global_block_bottom", "global_block_top : num_blocks"),
])
def test_bigbird_changed_by_one_token_is_left_alone(before: str, after: str) -> None:
    changed = BIGBIRD_FILE.replace(before, after, 1)
    assert changed != BIGBIRD_FILE
    assert port(changed, line_of(changed, "rand_attn = ["), "Data dependent operator") is None
    renamed = BIGBIRD_FILE.replace("class BigBirdPegasusBlockSparseAttention(", "class MyAttention(")
    assert port(renamed, line_of(renamed, "np.zeros((num_blocks"), "Data dependent operator") is None


REFORMER_FILE = '''\
from functools import reduce
from operator import mul

import torch
from torch import nn


class AxialPositionEmbeddings(nn.Module):
    """
    Constructs axial position embeddings. Useful for very long input sequences to save memory and time.
    """

    def __init__(self, config):
        super().__init__()
        self.axial_pos_shape = config.axial_pos_shape
        self.axial_pos_embds_dim = config.axial_pos_embds_dim
        self.dropout = config.hidden_dropout_prob

        self.least_common_mult_chunk_length = _get_least_common_mult_chunk_len(config)
        self.weights = nn.ParameterList()

        if sum(self.axial_pos_embds_dim) != config.hidden_size:
            raise ValueError(
                f"Make sure that config.axial_pos_embds factors: {self.axial_pos_embds_dim} sum to "
                f"config.hidden_size: {config.hidden_size}"
            )

        # create weights
        for axis, axial_pos_embd_dim in enumerate(self.axial_pos_embds_dim):
            # create expanded shapes
            ax_shape = [1] * len(self.axial_pos_shape)
            ax_shape[axis] = self.axial_pos_shape[axis]
            ax_shape = tuple(ax_shape) + (axial_pos_embd_dim,)

            # create tensor and init
            self.weights.append(nn.Parameter(torch.ones(ax_shape, dtype=torch.float32)))

    def forward(self, position_ids):
        # broadcast weights to correct shape
        batch_size = position_ids.shape[0]
        sequence_length = position_ids.shape[1]

        broadcasted_weights = [
            weight.expand((batch_size,) + self.axial_pos_shape + weight.shape[-1:]) for weight in self.weights
        ]

        if self.training is True:
            if reduce(mul, self.axial_pos_shape) != sequence_length:
                raise ValueError(
                    f"If training, make sure that config.axial_pos_shape factors: {self.axial_pos_shape} multiply to "
                    f"sequence length. Got prod({self.axial_pos_shape}) != sequence_length: {sequence_length}. "
                    f"You might want to consider padding your sequence length to {reduce(mul, self.axial_pos_shape)} "
                    "or changing config.axial_pos_shape."
                )

            if self.dropout > 0:
                weights = torch.cat(broadcasted_weights, dim=-1)
                # permute weights so that 2D correctly drops dims 1 and 2
                transposed_weights = weights.transpose(2, 1)
                # drop entire matrix of last two dims (prev dims 1 and 2)
                dropped_transposed_weights = nn.functional.dropout2d(
                    transposed_weights, p=self.dropout, training=self.training
                )
                dropped_weights = dropped_transposed_weights.transpose(2, 1)

                position_encodings = torch.reshape(dropped_weights, (batch_size, sequence_length, -1))

            else:
                position_encodings = torch.cat(
                    [torch.reshape(weight, (batch_size, sequence_length, -1)) for weight in broadcasted_weights],
                    dim=-1,
                )

        else:
            if reduce(mul, self.axial_pos_shape) < sequence_length:
                raise ValueError(
                    f"Make sure that config.axial_pos_shape factors: {self.axial_pos_shape} multiply at least to "
                    f"max(sequence_length, least_common_mult_chunk_length): max({sequence_length}, "
                    f"{self.least_common_mult_chunk_length})."
                )

            # compute how many columns are needed; ceil-div as `(x + bs - 1) // bs` to keep
            # the engine on positive-arithmetic, and the `torch_compilable_check` calls propagate
            # the trivial bounds `0 <= max_position_id < axial_pos_shape[0] * axial_pos_shape[1]`
            # (from the axial-encoding contract) so the result stays within `[1, axial_pos_shape[0]]`.
            max_position_id = position_ids.max().item()
            axial_h, axial_w = self.axial_pos_shape
            torch_compilable_check(max_position_id >= 0, "Axial position id underflow.")
            torch_compilable_check(
                max_position_id < axial_h * axial_w,
                "Position id exceeds axial_pos_shape[0] * axial_pos_shape[1].",
            )
            required_pos_encodings_columns = (max_position_id + axial_w) // axial_w

            # cut to columns that are needed
            position_encodings = torch.cat(
                [weight[:, :required_pos_encodings_columns] for weight in broadcasted_weights], dim=-1
            )
            position_encodings = torch.reshape(position_encodings, (batch_size, -1, position_encodings.shape[-1]))

            # select correct position encodings
            position_encodings = torch.cat(
                [
                    torch.index_select(position_encodings[i], 0, position_ids[i]).unsqueeze(0)
                    for i in range(batch_size)
                ],
                dim=0,
            )

        return position_encodings
'''


def test_the_reformer_fingerprints_are_those_of_the_transformers_code() -> None:
    port = {p.qualname: p for p in PORTS}["AxialPositionEmbeddings.forward"]
    found = {name: fingerprint(node) for node, _span in nodes_of_kind(cst.parse_module(REFORMER_FILE), cst.FunctionDef)
             for name in [f"AxialPositionEmbeddings.{node.name.value}"]}
    assert found["AxialPositionEmbeddings.forward"] == port.fingerprint
    assert found["AxialPositionEmbeddings.__init__"] == dict(port.relies_on)["AxialPositionEmbeddings.__init__"]


def test_reformer_keeps_the_whole_table_instead_of_reading_the_largest_id_back() -> None:
    rewrite = port(REFORMER_FILE, line_of(REFORMER_FILE, "position_ids.max().item()"), "Unsupported Tensor.item() call")
    assert rewrite is not None
    assert rewrite.source == REFORMER_FILE.replace("max_position_id = position_ids.max().item()",
                                                   "max_position_id = reduce(mul, self.axial_pos_shape) - 1")
    assert rewrite.settings == ()  # no capture_scalar_outputs: nothing is read back
    assert "index_select reads the same rows" in rewrite.title and ".item() sizes a slice" in rewrite.cause


@pytest.mark.parametrize(("h", "w", "ids"), [(4, 8, [0, 5, 31]), (4, 8, [0, 1, 2]), (3, 5, [14, 0, 7, 7]), (2, 2, [1])])
def test_reformer_the_whole_table_gives_the_rows_the_cut_one_gives(h: int, w: int, ids: list[int]) -> None:
    # the table as (rows h, columns w) of entries; cut to the rows the largest id needs, flattened, read by id:
    # the whole table flattened holds each id's entry at the same index
    table = [[(row, col) for col in range(w)] for row in range(h)]
    needed = (max(ids) + w) // w
    cut = [entry for row in table[:needed] for entry in row]
    whole = [entry for row in table[:(h * w - 1 + w) // w] for entry in row]
    assert (h * w - 1 + w) // w == h
    assert [cut[i] for i in ids] == [whole[i] for i in ids] == [(i // w, i % w) for i in ids]


@pytest.mark.parametrize(("function", "before", "after"), [
    ("forward", "weight[:, :required_pos_encodings_columns]", "weight[:, :required_pos_encodings_columns + 1]"),
    ("forward", "position_ids[i]).unsqueeze(0)", "position_ids[i] + 1).unsqueeze(0)"),
    ("__init__", "ax_shape[axis] = self.axial_pos_shape[axis]", "ax_shape[axis] = self.axial_pos_shape[0]"),
])
def test_reformer_changed_by_one_token_is_left_alone(function: str, before: str, after: str) -> None:
    changed = REFORMER_FILE.replace(before, after, 1)
    assert changed != REFORMER_FILE and _method(changed, function) != _method(REFORMER_FILE, function)
    assert port(changed, line_of(changed, "position_ids.max().item()"), "Unsupported Tensor.item() call") is None


OUTPUT_CAPTURING = '''\
from functools import wraps


def capture_outputs(func=None, *, tie_last_hidden_states=True):
    """
    Decorator to intercept specific layer outputs through hooks. The hooks are installed only once and lazily,
    the first time output capture is requested with the `output_xxx` kwargs/config.
    The implementation is fully context/thread safe, except when using `torch.compile`, as dynamo is unable to trace
    through `ContextVar` methods.

    Args:
        tie_last_hidden_states (`bool`, *optional*, defaults to `True`):
            Whether to overwrite `out.hidden_states[-1]` with the `out.last_hidden_state`. This is true for all language models
            and should be toggled off only if `out.hidden_states[-1]` has to be the hidden state before last layer norm, which
            is needed for some vision models (e.g. CLIP, SigLIP). A model config can override this default per-model by setting
            `config.tie_last_hidden_states`.
    """

    def wrapped_fn(func):
        @wraps(func)
        def wrapper(self, *args, **kwargs):
            # Pop it so that internal modules always return a dict even if False is requested
            return_dict = kwargs.pop("return_dict", getattr(self.config, "return_dict", True))

            capturable_flags = _CAN_RECORD_REGISTRY.get(self)
            recordable_keys = {
                f"output_{k}": kwargs.get(f"output_{k}", getattr(self.config, f"output_{k}", False))
                for k in capturable_flags
            }
            # For BC as cross-attentions used to be captured with `output_attentions`
            if "cross_attentions" in capturable_flags:
                recordable_keys["output_cross_attentions"] = kwargs.get(
                    "output_attentions", getattr(self.config, "output_attentions", False)
                )
            # The sam model variants need this annoying exception as well...
            if "mask_decoder_attentions" in capturable_flags:
                recordable_keys["output_mask_decoder_attentions"] = kwargs.get(
                    "output_attentions", getattr(self.config, "output_attentions", False)
                )

            collected_outputs = {k.replace("output_", ""): [] for k, v in recordable_keys.items() if v}
            # `output_hidden_states` may select hidden states by index (or indices), in which case only those are kept. The
            # indices are the ones that would select them from all the hidden states, so they may be negative
            selected = selected_hidden_states(recordable_keys.get("output_hidden_states"))
            if selected is not None:
                collected_outputs["_hidden_states_layers"] = resolve_hidden_states_indices(self, selected)
            # Make sure hooks are installed if we need to collect outputs
            if len(collected_outputs) > 0:
                maybe_install_capturing_hooks(self)
            # Let's activate the output collector hooks if needed!
            output_token = _active_collector.set(collected_outputs)

            # Run the forward
            try:
                outputs = func(self, *args, **kwargs)
            # Reset the states
            finally:
                _active_collector.reset(output_token)

            collected_outputs.pop("_hidden_states_layers", None)
            # Inject collected outputs into model output (return everything as tuples for BC)
            for key in collected_outputs:
                if key == "hidden_states":
                    tie_last = getattr(self.config, "tie_last_hidden_states", None)
                    tie_last = tie_last_hidden_states if tie_last is None else tie_last
                    if not tie_last or not collected_outputs[key] or collected_outputs[key][-1] is None:
                        pass
                    elif hasattr(outputs, "vision_hidden_states"):
                        collected_outputs[key] = collected_outputs[key][:-1]
                        collected_outputs[key].append(outputs.vision_hidden_states)
                    elif hasattr(outputs, "last_hidden_state"):
                        collected_outputs[key] = collected_outputs[key][:-1]
                        collected_outputs[key].append(outputs.last_hidden_state)

                outputs[key] = tuple(collected_outputs[key])

            if return_dict is False:
                outputs = outputs.to_tuple()

            return outputs

        return wrapper

    if func is not None:
        return wrapped_fn(func)
    return wrapped_fn
'''

# the comprehension of the output_* flags, as the wrapper (three levels deep) holds it
_FLAGS_LOOP = "                for k in capturable_flags\n"


def test_the_capture_outputs_fingerprint_is_the_one_of_the_transformers_code() -> None:
    port = {p.qualname: p for p in PORTS}["capture_outputs.wrapped_fn.wrapper"]
    wrapper, = (node for node, _span in nodes_of_kind(cst.parse_module(OUTPUT_CAPTURING), cst.FunctionDef)
                if node.name.value == "wrapper")
    assert fingerprint(wrapper) == port.fingerprint


def test_capture_outputs_iterates_over_a_tuple_of_the_flags_and_nothing_else_changes() -> None:
    line = line_of(OUTPUT_CAPTURING, "recordable_keys = {")
    rewrite = port(OUTPUT_CAPTURING, line, "Missing tp_iternext")
    assert rewrite is not None
    expected = OUTPUT_CAPTURING.replace(_FLAGS_LOOP, "                for k in tuple(capturable_flags)\n")
    assert expected != OUTPUT_CAPTURING and rewrite.source == expected  # one expression; no import torch added
    assert "dict_keyiterator" in rewrite.cause and rewrite.title.startswith("iterate over tuple(capturable_flags)")
    assert rewrite.settings == ()


def test_capture_outputs_flags_over_the_tuple_are_the_same_dict() -> None:
    # the comprehension as written and as ported, on a registry entry of several keys: same keys, values, order
    flags = {"hidden_states": 1, "attentions": 2, "cross_attentions": 3}
    kwargs = {"output_attentions": True}

    def given(k: str) -> object:
        return kwargs.get(f"output_{k}", False)

    before = {f"output_{k}": given(k) for k in flags}
    after = {f"output_{k}": given(k) for k in tuple(flags)}
    assert list(after.items()) == list(before.items())
    assert list(after) == ["output_hidden_states", "output_attentions", "output_cross_attentions"]


@pytest.mark.parametrize(("before", "after"), [
    (_FLAGS_LOOP, "                for k in list(capturable_flags)\n"),  # the edit's expression itself differs
    ('kwargs.get(f"output_{k}", getattr(self.config, f"output_{k}", False))',
     'kwargs.get(f"output_{k}", getattr(self.config, f"output_{k}", True))'),
    ("if return_dict is False:", "if return_dict is True:"),
])
def test_capture_outputs_changed_by_one_token_is_left_alone(before: str, after: str) -> None:
    changed = OUTPUT_CAPTURING.replace(before, after, 1)
    assert changed != OUTPUT_CAPTURING
    assert port(changed, line_of(changed, "recordable_keys = {"), "Missing tp_iternext") is None
    # the same wrapper under another decorator's name is another function
    renamed = OUTPUT_CAPTURING.replace("def capture_outputs(", "def my_capture(", 1)
    assert port(renamed, line_of(renamed, "recordable_keys = {"), "Missing tp_iternext") is None
