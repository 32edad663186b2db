"""Library ports: known torch-traceable replacements for whole library functions that break.

Some breaks are not one idiom a rule can rewrite but a whole function written for eager: IBert's
``batch_frexp`` goes through NumPy and a ``decimal`` loop over a tensor's values (46 breaks in the
HF bench's IBert), the MoE expert loops of DBRX and SwitchTransformers iterate over the experts a
data-dependent ``nonzero`` picks. Each was ported by hand to torch and proven (identical outputs,
the breaks gone, under ``dynscope fix`` on bench/hf_models/: bench/hf_models/README.md).

A port is (the function's qualified name in its module, the fingerprint of the exact code it was
written for, the replacement). ``library-port`` fires when the break line lies inside such a
function, or calls it by name, or lies inside a helper the port answers for (``Port.answers``: EnCodec's
``_pad1d`` breaks on the paddings ``forward`` hands it), AND the function's fingerprint matches, and those
of the functions the port relies on (``Port.relies_on``: the ``__init__`` that sets the values it
recomputes): a function changed by one token (another library version, a user's edit) is left
alone. It replaces the body, keeping the ``def`` line, the decorators and the docstring; an *edit* port
(``Port.edits``) replaces only a few exact expressions of the function and leaves the rest of it as it is
(BigBird's ``np.sum`` of Python ints, Reformer's ``.item()`` that cuts the axial table).

The fingerprint is the sha256 of the function's code (decorators and the lines above left out)
as Python tokens, comments and blank lines dropped, so a re-indented or re-commented copy still
matches; ``fingerprint`` computes it for a new port.
"""

from __future__ import annotations

import hashlib
import io
import textwrap
import tokenize
from dataclasses import dataclass

import libcst as cst

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.locate import (
    dotted_name,
    ensure_import,
    functions_around,
    nodes_of_kind,
    parents,
    replace,
    statements_at,
    walk,
)


@dataclass(frozen=True)
class Port:
    """One known replacement for one exact library function."""

    qualname: str  # the function's name in its module: "batch_frexp", "DbrxExperts.forward"
    fingerprint: str  # sha256 of the original's normalized code (``fingerprint``)
    replacement: str  # the new function, whole; its body replaces the original's (same parameters); "" with ``edits``
    what: str  # the change and its cost, for fix's table
    cause: str  # the break's real cause in words
    # other functions of the module whose breaks porting this one answers ("Class._helper"): the break
    # is in a helper, the cause in what the ported function hands it
    answers: tuple[str, ...] = ()
    # (qualname, fingerprint) of the other functions whose code the port relies on (the __init__ that
    # sets the values it recomputes): all must match too, or the port is not proven for this code
    relies_on: tuple[tuple[str, str], ...] = ()
    # a port of a few expressions instead of the whole body: (the expression's code, its replacement), each
    # found exactly once in the function (whose fingerprint already pins down where), the rest of it untouched
    edits: tuple[tuple[str, str], ...] = ()

    @property
    def uses_torch(self) -> bool:
        """Whether the new code names torch (then ``import torch`` is made sure of)."""
        return "torch" in self.replacement or any("torch" in new for _old, new in self.edits)


_BATCH_FREXP = '''
def batch_frexp(inputs, max_bit=31):
    shape_of_input = inputs.size()
    inputs = inputs.view(-1)
    output_m, output_e = torch.frexp(inputs)
    # decimal's ROUND_HALF_UP: ties away from zero (torch.round rounds them to even); exact in float64
    shifted = output_m.to(torch.float64) * (2**max_bit)
    output_m = (torch.sign(shifted) * torch.floor(torch.abs(shifted) + 0.5)).to(torch.int64)
    output_e = float(max_bit) - output_e.to(torch.float64)
    return output_m.view(shape_of_input), output_e.view(shape_of_input)
'''

_DBRX_EXPERTS_FORWARD = '''
def forward(self, hidden_states, top_k_index, top_k_weights):
    batch_size = hidden_states.shape[0]
    hidden_states = hidden_states.reshape(-1, self.hidden_size)
    split_expert_shape = (-1, self.ffn_hidden_size, self.hidden_size)
    # every expert on every token in three batched matmuls (DbrxExpertGLU's, over the experts' stacked
    # weights), then each token's sum of the outputs weighted by its routing weight for each expert
    # (0 where not routed): no data-dependent selection of experts or tokens, and few ops per layer
    w1 = self.mlp.w1.view(split_expert_shape)
    v1 = self.mlp.v1.view(split_expert_shape)
    w2 = self.mlp.w2.view(split_expert_shape)
    gate_proj = self.mlp.activation_fn(torch.matmul(hidden_states, w1.transpose(1, 2)))
    up_proj = torch.matmul(hidden_states, v1.transpose(1, 2))
    states = torch.matmul(gate_proj * up_proj, w2)
    weights = torch.zeros(hidden_states.shape[0], self.num_experts + 1, dtype=top_k_weights.dtype, device=top_k_weights.device)
    weights = weights.scatter_add(1, top_k_index, top_k_weights)
    next_states = torch.zeros_like(hidden_states)
    # summed in expert order, as the original adds each expert's rows
    for expert_idx in range(self.num_experts):
        next_states = next_states + states[expert_idx] * weights[:, expert_idx, None]
    return next_states.view(batch_size, -1, self.hidden_size)
'''

_SWITCH_EXPERTS_FORWARD = '''
def forward(self, hidden_states, selected_experts, routing_weights):
    final_hidden_states = torch.zeros_like(hidden_states)
    # every expert on every token, weighted by the token's routing weight for it (0 where not routed):
    # the work no longer depends on which experts the router picked
    for expert_idx in range(self.num_experts):
        weight = routing_weights[:, 0] * selected_experts[:, 0, expert_idx]
        current_hidden_states = self[f"expert_{expert_idx}"](hidden_states) * weight[:, None]
        final_hidden_states = final_hidden_states + current_hidden_states.to(hidden_states.dtype)
    return final_hidden_states
'''

_ENCODEC_CONV1D_FORWARD = '''
def forward(self, hidden_states):
    # the padding arithmetic in Python ints from the conv's own settings: the stride / kernel_size /
    # padding_total buffers hold the same constants as int64 tensors, and _pad1d's branch on them breaks
    kernel_size = (self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1
    stride = self.conv.stride[0]
    padding_total = kernel_size - stride
    length = hidden_states.shape[-1]
    # _get_extra_padding_for_conv1d's ceil((length - kernel_size + padding_total) / stride + 1) - 1 frames, in integers
    n_frames = -((kernel_size - padding_total - length) // stride)
    extra_padding = n_frames * stride + kernel_size - padding_total - length

    if self.causal:
        # Left padding for causal
        hidden_states = self._pad1d(hidden_states, (padding_total, extra_padding), mode=self.pad_mode)
    else:
        # Asymmetric padding required for odd strides
        padding_right = padding_total // 2
        padding_left = padding_total - padding_right
        hidden_states = self._pad1d(hidden_states, (padding_left, padding_right + extra_padding), mode=self.pad_mode)

    hidden_states = self.conv(hidden_states)

    if self.norm_type == "time_group_norm":
        hidden_states = self.norm(hidden_states)

    return hidden_states
'''

# BigBird's random-block plan: np.sum over a list of Python ints gives a NumPy integer, traced as a 0-d tensor,
# so np.zeros gets a tensor for a size ("Data dependent operator" in the list comprehension); sum() gives the same int
# Eval mode only: in training the method goes on to draw its random blocks with np.random.permutation, and without the
# np.zeros break Dynamo traces into that loop (more breaks, other draws: HF bench BigBird-Pegasus --train, issue 40);
# there the original np.sum stays, the break with it, and the blocks are drawn in eager as before
_BIGBIRD_PLAN_SUM = (("np.sum(plan_num_rand_blocks[: max_plan_idx + 1])",
                      "(np.sum(plan_num_rand_blocks[: max_plan_idx + 1]) if self.training "
                      "else sum(plan_num_rand_blocks[: max_plan_idx + 1]))"),)
_BIGBIRD_WHAT = ("use sum() instead of np.sum() on the random-block plan's Python ints (a list _get_rand_attn_plan "
                 "builds) in eval mode: the mask's width as a Python int, the same value (training mode keeps np.sum)")
_BIGBIRD_CAUSE = ("np.sum on a list of Python ints returns a NumPy integer, which Dynamo traces as a tensor: np.zeros "
                  "then gets a tensor for a size (filed as \"Data dependent operator\")")

# Reformer's axial position encodings: the table is cut to the rows the largest position id needs, found with
# .item() (a break without capture_scalar_outputs); index_select then reads rows by position id, and the whole
# table holds them at the same flat indices (row p // w, column p % w): the largest valid id keeps every row
_REFORMER_WHOLE_TABLE = (("position_ids.max().item()", "reduce(mul, self.axial_pos_shape) - 1"),)
_REFORMER_WHAT = ("keep AxialPositionEmbeddings' whole table instead of cutting it at position_ids.max().item(): "
                  "index_select reads the same rows, no .item(); an out-of-range position id is refused by index_select "
                  "(an IndexError) rather than by the ValueError check")
_REFORMER_CAUSE = ("position_ids.max().item() sizes a slice of the table (how many rows the largest id needs): a "
                   "tensor's value read back to Python")

# transformers' capture_outputs wrapper (every model whose forward it decorates): a break under its try/finally
# (around the forward) cannot be resumed, so Dynamo runs the whole wrapper in eager; its dict comprehension (a code
# object of its own in Python 3.11) is then traced as a frame of its own, with `iter(capturable_flags)`, a
# dict_keyiterator, for an argument, and next() on that is a break ("Missing tp_iternext"). Over a tuple of the same
# keys the argument is a tuple_iterator, which Dynamo can wrap: the same dict, the same keys in the same order
_OUTPUTS_FLAG = '    f"output_{k}": kwargs.get(f"output_{k}", getattr(self.config, f"output_{k}", False))'
_OUTPUTS_FLAGS_TUPLE = ((f"{{\n{_OUTPUTS_FLAG}\n    for k in capturable_flags\n}}",
                         f"{{\n{_OUTPUTS_FLAG}\n    for k in tuple(capturable_flags)\n}}"),)
_OUTPUTS_WHAT = ("iterate over tuple(capturable_flags) in capture_outputs' dict of output_* flags: the same keys in the same "
                 "order, an iterator Dynamo can take when the comprehension runs as a frame of its own")
_OUTPUTS_CAUSE = ("a break under capture_outputs' try/finally sends the whole wrapper to eager; its dict comprehension is "
                  "then traced on its own, its argument a dict_keyiterator Dynamo cannot call next() on (\"Missing tp_iternext\")")

_DENSE_COST = "every expert runs on every token: E× the expert FLOPs"
_MOE_CAUSE = "a loop over the experts a data-dependent nonzero picks (the number of experts hit, and their tokens, are data)"

# transformers 5.24 (quant_modules.py, modeling_dbrx.py, modeling_switch_transformers.py, modeling_encodec.py,
# modeling_bigbird_pegasus.py, modeling_big_bird.py, modeling_reformer.py, utils/output_capturing.py)
PORTS: tuple[Port, ...] = (
    Port("batch_frexp", "c93751ff9d299408717da1f796ce605f6a6239456d1c3d9b84023f8a58adc157", _BATCH_FREXP,
         "port batch_frexp() from NumPy and decimal to torch (torch.frexp, rounding half away from zero in float64: "
         "same values and dtypes)",
         "NumPy and decimal on tensors: np.frexp, a Python loop of decimal rounding over the values, torch.from_numpy"),
    Port("DbrxExperts.forward", "fead715105d32674e82b698af3ea3872a9a76bfcd051f5e1dc7c41d0bb5a872f", _DBRX_EXPERTS_FORWARD,
         f"run DbrxExperts.forward dense, without nonzero: {_DENSE_COST} (in three batched matmuls)", _MOE_CAUSE),
    Port("SwitchTransformersExperts.forward", "2003f104468ad7dc0052a1c4637f3c4949e13180b92bec269e4b0a7f44636eef", _SWITCH_EXPERTS_FORWARD,
         f"run SwitchTransformersExperts.forward dense, without nonzero: {_DENSE_COST}", _MOE_CAUSE),
    Port("EncodecConv1d.forward", "e85d191040626a83022e8df45d160b6fc512397feb3ce330688e40f99d22957a", _ENCODEC_CONV1D_FORWARD,
         "compute EncodecConv1d's padding in Python ints from self.conv's kernel size, stride and dilation (the values "
         "its int64 buffers hold; the same paddings, exact in integers)",
         "padding arithmetic on constant int64 buffers (stride, kernel_size, padding_total): the paddings are tensors, "
         "and _pad1d branches on them",
         answers=("EncodecConv1d._pad1d", "EncodecConv1d._get_extra_padding_for_conv1d"),
         relies_on=(("EncodecConv1d.__init__", "41be957b2a0eb4c8410bbcfbf7ed4e013ed6f8ae5aff7d4593d18da380eea383"),
                    ("EncodecConv1d._get_extra_padding_for_conv1d",
                     "5f0f73e026eb229b0ec386eb4dfb320a33bd401d241889833a6062457e6a98ae"))),
    # one method, word for word, in BigBird and BigBird-Pegasus
    *(Port(f"{cls}._bigbird_block_rand_mask_with_head", "ffa35a7d2abdd21d9aa9fc0f30aa16d9bd384f94da839bf0191c81ecef4eddf2",
           "", _BIGBIRD_WHAT, _BIGBIRD_CAUSE, edits=_BIGBIRD_PLAN_SUM)
      for cls in ("BigBirdPegasusBlockSparseAttention", "BigBirdBlockSparseAttention")),
    Port("AxialPositionEmbeddings.forward", "1e3d14626a0c87ccc708e6dd0b85e26945897f39f6558261e8049a5498c3e69b", "",
         _REFORMER_WHAT, _REFORMER_CAUSE, edits=_REFORMER_WHOLE_TABLE,
         relies_on=(("AxialPositionEmbeddings.__init__", "5a1a20509f942381cb13f48a4f1a8aa70a07f4f1aa2c292a6a818c2d65f7d6ad"),)),
    Port("capture_outputs.wrapped_fn.wrapper", "6f284acfa8b43f6717229e01394d8e3ab61b1d11948f9ba2ce5baac659cc7713", "",
         _OUTPUTS_WHAT, _OUTPUTS_CAUSE, edits=_OUTPUTS_FLAGS_TUPLE),
)

_DROPPED_TOKENS = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER})


def normalized_code(function: cst.FunctionDef) -> str:
    """The function's code as tokens, one space apart: decorators, comments, blank lines and the
    width of indentation left out (INDENT / DEDENT / NEWLINE kept as markers: blocks still count)."""
    code = cst.Module(body=[]).code_for_node(function.with_changes(decorators=[], leading_lines=[]))
    words: list[str] = []
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type in _DROPPED_TOKENS:
            continue
        marker = {tokenize.INDENT: "<indent>", tokenize.DEDENT: "<dedent>", tokenize.NEWLINE: "<newline>"}.get(token.type)
        words.append(marker or token.string)
    return " ".join(words)


def fingerprint(function: cst.FunctionDef) -> str:
    """sha256 of ``normalized_code``: what a port is keyed on."""
    return hashlib.sha256(normalized_code(function).encode()).hexdigest()


def fingerprint_of_source(source: str) -> str:
    """The fingerprint of the one function ``source`` holds (for writing a new port's entry)."""
    statement = cst.parse_statement(textwrap.dedent(source).strip() + "\n")
    if not isinstance(statement, cst.FunctionDef):
        raise ValueError("the source is not one function")
    return fingerprint(statement)


def qualified_name(module: cst.Module, function: cst.FunctionDef) -> str:
    """``Class.method`` / ``outer.inner`` / ``name``: the function's path in its module."""
    held_by = parents(module)
    names = [function.name.value]
    node: cst.CSTNode = function
    while node in held_by:
        node = held_by[node]
        if isinstance(node, (cst.ClassDef, cst.FunctionDef)):
            names.append(node.name.value)
    return ".".join(reversed(names))


def _parameter_names(function: cst.FunctionDef) -> list[str]:
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            every.append(star)
    return [param.name.value for param in every]


def _docstring(function: cst.FunctionDef) -> list[cst.BaseStatement]:
    """The docstring statement, when the function opens with one."""
    body = function.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return []
    first = body.body[0]
    if isinstance(first, cst.SimpleStatementLine) and len(first.body) == 1 and isinstance(first.body[0], cst.Expr) \
            and isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        return [first]
    return []


def _ported(function: cst.FunctionDef, port: Port) -> cst.FunctionDef | None:
    """``function`` with the port's body (its docstring kept); None when the port's parameters differ."""
    replacement = cst.parse_statement(textwrap.dedent(port.replacement).strip() + "\n")
    assert isinstance(replacement, cst.FunctionDef) and isinstance(replacement.body, cst.IndentedBlock)  # the table's own text
    body = function.body
    if _parameter_names(replacement) != _parameter_names(function) or not isinstance(body, cst.IndentedBlock):
        return None
    docstring = _docstring(function)
    statements = list(replacement.body.body)
    after_docstring = body.body[1] if docstring and len(body.body) > 1 else None
    if isinstance(after_docstring, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and statements \
            and isinstance(statements[0], (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        # the blank lines after the docstring stay (libcst holds them above the next statement), its comments go with the old body
        blank = [line for line in after_docstring.leading_lines if line.comment is None]
        statements[0] = statements[0].with_changes(leading_lines=[*blank, *statements[0].leading_lines])
    return function.with_changes(body=body.with_changes(body=[*docstring, *statements]))


def _edited(function: cst.FunctionDef, port: Port) -> cst.FunctionDef | None:
    """``function`` with the port's expressions replaced; None when one is not found exactly once."""
    printer = cst.Module(body=[])
    for old, new in port.edits:
        found = [node for node in walk(function) if isinstance(node, cst.BaseExpression) and printer.code_for_node(node) == old]
        if len(found) != 1:
            return None
        changed = function.deep_replace(found[0], cst.parse_expression(new))
        if not isinstance(changed, cst.FunctionDef):
            return None
        function = changed
    return function


def _called_names(statement: cst.CSTNode) -> set[str]:
    return {dotted_name(node.func) for node in walk(statement) if isinstance(node, cst.Call)}


def _candidates(module: cst.Module, line: int, ported_names: set[str]) -> list[cst.FunctionDef]:
    """The functions the break line is in (innermost first), then the top-level ones of this file it calls by name."""
    found = list(reversed(functions_around(module, line)))
    called = ported_names & set().union(*(_called_names(statement) for statement in statements_at(module, line)))
    # a plain-name call reaches a function of the module's top level only (not a method named alike)
    found += [node for node, _span in nodes_of_kind(module, cst.FunctionDef)
              if node.name.value in called and node not in found and qualified_name(module, node) == node.name.value]
    return found


def _functions_named(module: cst.Module, qualname: str) -> list[cst.FunctionDef]:
    last = qualname.rsplit(".", 1)[-1]
    return [node for node, _span in nodes_of_kind(module, cst.FunctionDef)
            if node.name.value == last and qualified_name(module, node) == qualname]


def _target(module: cst.Module, function: cst.FunctionDef, qualname: str, port: Port) -> cst.FunctionDef | None:
    """The function the port replaces, given the one the break is in or calls: itself, or (for a
    function the port answers for) the ported function of the same module; None when any code the
    port stands on is not the exact code it was written for."""
    targets = [function] if qualname == port.qualname else _functions_named(module, port.qualname)
    if len(targets) != 1 or fingerprint(targets[0]) != port.fingerprint:
        return None
    for qualname, expected in port.relies_on:
        relied = _functions_named(module, qualname)
        if len(relied) != 1 or fingerprint(relied[0]) != expected:
            return None
    return targets[0]


def library_port(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    by_name = {port.qualname: port for port in PORTS}
    by_name.update({answered: port for port in PORTS for answered in port.answers})
    last_names = {qualname.rsplit(".", 1)[-1] for qualname in by_name}
    for candidate in _candidates(module, site.line, last_names):
        # the plain name first: resolving every node's parent for qualified_name costs a large file's walk
        qualname = qualified_name(module, candidate) if candidate.name.value in last_names else ""
        port = by_name.get(qualname)
        function = None if port is None else _target(module, candidate, qualname, port)
        if port is None or function is None:
            continue
        ported = _edited(function, port) if port.edits else _ported(function, port)
        if ported is None:
            continue
        rewritten = replace(module, function, ported)
        if port.uses_torch:  # a pure-Python edit adds no import to a module that has none (output_capturing.py)
            rewritten = ensure_import(rewritten, "torch")
        return Rewrite("library-port", port.what, port.cause, site.line, rewritten.code)
    return None
