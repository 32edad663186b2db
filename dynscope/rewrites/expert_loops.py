"""A loop over the experts ``nonzero()`` found, made dense: ``dense-expert-loop``.

The shape (transformers' eager mixture-of-experts loop, Mixtral's and its relatives', and code written like it)::

    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
    for expert_idx in expert_hit:
        expert_idx = expert_idx[0]
        ...
        top_k_pos, token_idx = torch.where(expert_mask[expert_idx])
        ... hidden_states[token_idx] ... weights[token_idx, top_k_pos, None] ...
        final.index_add_(0, token_idx, contribution)

``nonzero()`` and ``torch.where(mask)`` give tensors whose sizes only the data decides, which ends the graph (torch
2.13 files it as a "Dynamic shape operator", then a data-dependent branch on the expert's number). The dense form
loops over every expert by number (``range(n)``: Python ints, so ``if expert_idx == self.num_experts`` stays a
Python branch), takes every position of the mask in ``torch.where``'s own order (``torch.unravel_index`` of
``arange(numel)``, row-major as ``where`` lists them), and keeps only the routed ones where the loop's result
leaves it, at the ``index_add_``, with ``torch.where`` (not a product: an expert's overflow on a token it was not
given must not turn the sum into NaN).

The dense loop visits every row of the hit mask, the experts no token chose too: a body that cannot run for one of
those (one-hot's extra "no expert" class indexing past the weights, with no ``if expert_idx == self.num_experts:
continue``) fails its trial, and fix says so; the rule cannot see which classes have weights.

It is denser, and its title says by how much: each expert computes on every (slot, token) position of the mask
instead of its routed ones, about as many times the loop's work as there are experts. fix's profiled runs judge
whether that pays on the user's sizes.

The loop's element becomes a Python int: ``expert_idx = expert_idx[0]`` (``.item()``, ``int(...)``) first in the loop
is dropped (into another name, ``idx = int(row.item())``, it becomes ``idx = row``), and where the loop reads
nonzero's row only as ``expert_idx[0]``, that becomes ``expert_idx``. A skip of an empty selection (``if
token_idx.numel() == 0: continue``) stays: it never skips a routed token.

Declined: the index tensors read anywhere but inside a subscript, the index of the ``index_add_`` or such a skip
(their sizes would matter), more than one ``where`` or ``index_add_`` in the loop, an ``index_add_`` along a
dimension other than 0 or into something other than a name, the found rows read elsewhere, a loop with an
``else``, a row read whole (``experts[expert_idx]`` with ``expert_idx`` nonzero's one-element row).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.index_tensors import atom, nonzero_condition
from dynscope.rewrites.locate import (
    block_holding,
    dotted_name,
    ensure_import,
    expression_code,
    functions_around,
    names_in,
    parents,
    plain_names,
    positions,
    walk,
)
from dynscope.rewrites.scalar_sizes import assignments_of


@dataclass(frozen=True)
class _ExpertLoop:
    """``for expert in <rows of nonzero(hit)>:`` and the parts of it the dense form changes."""

    loop: cst.For
    hit: cst.BaseExpression  # the tensor whose nonzero entries are the experts the loop visits
    found: cst.SimpleStatementLine | None  # ``expert_hit = hit.nonzero()``, when the loop reads a name
    to_number: cst.SimpleStatementLine | None  # ``expert = expert[0]`` / ``.item()`` first in the loop: dropped
    row_numbers: tuple[cst.Subscript, ...]  # each ``expert[0]`` where the loop reads nonzero's row: made ``expert``
    where: cst.SimpleStatementLine  # ``top_k_pos, token_idx = torch.where(mask)``
    mask: cst.BaseExpression
    sink: cst.Call  # ``final.index_add_(0, token_idx, contribution)``


def _nonzero_rows(expression: cst.BaseExpression) -> tuple[cst.BaseExpression, bool] | None:
    """``(C, True)`` for ``C.nonzero()`` / ``torch.nonzero(C)`` (rows of one index each, for a 1-d ``C``), ``(C,
    False)`` for the flattened forms (``.nonzero().squeeze(-1)``, ``torch.where(C)[0]``), None otherwise."""
    flat = nonzero_condition(expression)
    if flat is not None:
        return flat, False
    if not isinstance(expression, cst.Call):
        return None
    keywords = {arg.keyword.value: expression_code(arg.value) for arg in expression.args if arg.keyword is not None}
    positional = [arg.value for arg in expression.args if arg.keyword is None and not arg.star]
    if keywords not in ({}, {"as_tuple": "False"}):
        return None
    name = dotted_name(expression.func)
    if name == "torch.nonzero" and len(positional) == 1:
        return positional[0], True
    if isinstance(expression.func, cst.Attribute) and expression.func.attr.value == "nonzero" and not positional \
            and not name.startswith("torch."):
        return expression.func.value, True
    return None


def _only_binding(module: cst.Module, function: cst.FunctionDef, name: str) -> cst.SimpleStatementLine | None:
    """The one statement ``name = ...`` of ``function``, when ``name`` is read once more (by the loop) and no more."""
    bindings = assignments_of(function, name)
    if len(bindings) != 1 or not isinstance(bindings[0], cst.AssignTarget) or len(plain_names(function.body, name)) != 2:
        return None
    assign = parents(module).get(bindings[0])
    statement = parents(module).get(assign) if isinstance(assign, cst.Assign) else None
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(bindings[0].target, cst.Name)
            and isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return None
    return statement


def _single_assign(statement: cst.BaseStatement) -> cst.Assign | None:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and \
            isinstance(statement.body[0], cst.Assign) and len(statement.body[0].targets) == 1:
        return statement.body[0]
    return None


def _to_number(loop: cst.For, variable: str, rows: bool) -> cst.SimpleStatementLine | None:
    """The loop's first statement when it makes the loop's element its number (``expert = expert[0]`` for nonzero's
    rows; ``.item()``, ``int(...)``, ``int(....item())`` for either form), into the same name or another."""
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    assign = _single_assign(body[0]) if body else None
    numbers = {f"{variable}.item()", f"int({variable})", f"int({variable}.item())"}
    numbers |= {f"{variable}[0]", f"int({variable}[0])"} if rows else set()
    if assign is None or not isinstance(assign.targets[0].target, cst.Name) or \
            expression_code(assign.value) not in numbers:
        return None
    assert isinstance(body[0], cst.SimpleStatementLine)  # _single_assign said so
    return body[0]


def _number_of_row(module: cst.Module, name: cst.Name) -> cst.Subscript | None:
    """``name[0]`` around ``name``, or None."""
    holder = parents(module).get(name)
    if isinstance(holder, cst.Subscript) and holder.value is name and len(holder.slice) == 1 and \
            isinstance(holder.slice[0].slice, cst.Index) and expression_code(holder.slice[0].slice.value) == "0":
        return holder
    return None


def _row_numbers(module: cst.Module, loop: cst.For, variable: str) -> tuple[cst.Subscript, ...] | None:
    """Every ``variable[0]`` in the loop, when the loop reads its row in no other way (each becomes the number)."""
    numbers = [_number_of_row(module, node) for node in plain_names(loop.body, variable)]
    return None if None in numbers else tuple(n for n in numbers if n is not None)


def _where_mask(assign: cst.Assign) -> cst.BaseExpression | None:
    """``M`` of ``a, b = torch.where(M)`` / ``M.nonzero(as_tuple=True)`` (the targets plain names), or of ``rows =
    torch.where(M)[0]`` and nonzero's other one-index forms."""
    target = assign.targets[0].target
    if isinstance(target, cst.Name):
        return nonzero_condition(assign.value)
    if not (isinstance(target, cst.Tuple) and all(isinstance(e.value, cst.Name) for e in target.elements)):
        return None
    call = assign.value
    if not isinstance(call, cst.Call) or any(arg.star for arg in call.args):
        return None
    arguments = [(arg.keyword.value if arg.keyword else None, arg.value) for arg in call.args]
    if dotted_name(call.func) == "torch.where" and len(arguments) == 1 and arguments[0][0] is None:
        return arguments[0][1]
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "nonzero" and \
            [(k, expression_code(v)) for k, v in arguments] == [("as_tuple", "True")]:
        return call.func.value
    return None


def _sink(loop: cst.For, indices: set[str]) -> cst.Call | None:
    """The loop's one ``name.index_add_(0, index, value)``, ``index`` one of ``where``'s results."""
    calls = [node for node in walk(loop.body) if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
             and node.func.attr.value == "index_add_"]
    if len(calls) != 1:
        return None
    call = calls[0]
    assert isinstance(call.func, cst.Attribute)  # chosen so above
    if len(call.args) != 3 or any(arg.keyword or arg.star for arg in call.args) or not dotted_name(call.func.value):
        return None
    dim, index = call.args[0].value, call.args[1].value
    if expression_code(dim) != "0" or not (isinstance(index, cst.Name) and index.value in indices):
        return None
    return call


def _read_as_index(module: cst.Module, loop: cst.For, name: cst.Name) -> bool:
    """Whether ``name`` is one of a subscript's indices within ``loop`` (``x[token_idx, pos, None]``), itself."""
    index = parents(module).get(name)
    element = parents(module).get(index) if isinstance(index, cst.Index) else None
    holder = parents(module).get(element) if isinstance(element, cst.SubscriptElement) else None
    while holder is not None and holder is not loop:
        holder = parents(module).get(holder)
    return holder is loop


def _in_skip_guard(module: cst.Module, loop: cst.For, name: cst.Name) -> bool:
    """Whether ``name`` is read in the test of ``if token_idx.numel() == 0: continue`` in ``loop`` (or ``len(...) ==
    0``, ``.shape[0] == 0``, ...): a skip of an empty selection, which the dense form never takes and which never
    skipped a routed token."""
    below: cst.CSTNode = name
    holder = parents(module).get(name)
    while holder is not None and holder is not loop and not isinstance(holder, cst.If):
        below, holder = holder, parents(module).get(holder)
    if not isinstance(holder, cst.If) or below is not holder.test or holder.orelse is not None:
        return False
    n = name.value
    if expression_code(holder.test) not in (f"{n}.numel() == 0", f"len({n}) == 0", f"{n}.shape[0] == 0",
                                            f"{n}.size(0) == 0", f"not {n}.numel()", f"not len({n})"):
        return False  # a skip on the selection's size other than its emptiness: the dense size would change it
    body = holder.body.body
    only = body[0] if len(body) == 1 else None
    if isinstance(only, cst.SimpleStatementLine):
        only = only.body[0] if len(only.body) == 1 else None
    return isinstance(only, cst.Continue)


def _where_in(module: cst.Module, function: cst.FunctionDef, loop: cst.For
              ) -> tuple[cst.SimpleStatementLine, cst.BaseExpression, cst.Call] | None:
    """The loop's one ``where`` on the mask, and its one ``index_add_``, when the indices are read nowhere else."""
    found = [(node, assign, mask) for node in walk(loop.body) if isinstance(node, cst.SimpleStatementLine)
             and (assign := _single_assign(node)) is not None and (mask := _where_mask(assign)) is not None]
    if len(found) != 1:
        return None
    where, assign, mask = found[0]
    indices = names_in(assign.targets[0].target)
    sink = _sink(loop, indices)
    if sink is None:
        return None
    targets = {id(node) for node in walk(assign.targets[0].target)}
    for name in indices:
        for read in plain_names(function.body, name):
            if id(read) in targets or read is sink.args[1].value:
                continue
            if not (_read_as_index(module, loop, read) or _in_skip_guard(module, loop, read)):
                return None  # read outside the loop, or as a whole tensor (its size would matter)
        if len(assignments_of(function, name)) != 1:
            return None
    return where, mask, sink


def _expert_loops(module: cst.Module, function: cst.FunctionDef) -> Iterator[_ExpertLoop]:
    for loop in (node for node in walk(function.body) if isinstance(node, cst.For)):
        if loop.orelse is not None or loop.asynchronous is not None or not isinstance(loop.target, cst.Name):
            continue
        found = None
        rows = _nonzero_rows(loop.iter)
        if rows is None and isinstance(loop.iter, cst.Name):
            found = _only_binding(module, function, loop.iter.value)
            assign = _single_assign(found) if found is not None else None
            rows = _nonzero_rows(assign.value) if assign is not None else None
        if rows is None:
            continue
        hit, whole_rows = rows
        to_number = _to_number(loop, loop.target.value, whole_rows)
        row_numbers = _row_numbers(module, loop, loop.target.value) if whole_rows and to_number is None else ()
        parts = _where_in(module, function, loop)
        if row_numbers is None or parts is None:
            continue
        yield _ExpertLoop(loop, hit, found, to_number, row_numbers, *parts)


def _spans(module: cst.Module, site: BreakSite, expert_loop: _ExpertLoop) -> bool:
    where = positions(module)
    nodes = [expert_loop.loop] + ([expert_loop.found] if expert_loop.found is not None else [])
    return any(where[node].start.line <= site.line <= where[node].end.line for node in nodes)


def _unused(function: cst.FunctionDef, wanted: str) -> str:
    taken = names_in(function)
    return next(name for name in (wanted, *(f"{wanted}_{n}" for n in range(2, 100))) if name not in taken)


class _Densify(cst.CSTTransformer):
    def __init__(self, expert_loop: _ExpertLoop, mask_name: str, module: cst.Module) -> None:
        self.parts = expert_loop
        self.mask_name = mask_name
        self.found_alone = expert_loop.found is not None and len(block_holding(module, expert_loop.found) or ()) == 1

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
                                  ) -> cst.BaseStatement | cst.RemovalSentinel | cst.FlattenSentinel[cst.BaseStatement]:
        if original_node is self.parts.found:
            return cst.SimpleStatementLine([cst.Pass()]) if self.found_alone else cst.RemovalSentinel.REMOVE
        if original_node is self.parts.to_number:
            assign = _single_assign(original_node)
            assert assign is not None  # _to_number chose a single assignment
            if expression_code(assign.targets[0].target) == expression_code(self.parts.loop.target):
                return cst.RemovalSentinel.REMOVE
            return updated_node.with_changes(body=[assign.with_changes(value=self.parts.loop.target)])
        if original_node is not self.parts.where:
            return updated_node
        mask = self.mask_name
        assign = _single_assign(updated_node)  # its rows already made numbers
        where_mask = _where_mask(assign) if assign is not None else None
        assert assign is not None and where_mask is not None  # the statement _where_in found, its parts renamed
        target = assign.targets[0].target
        first = "" if isinstance(target, cst.Tuple) else "[0]"  # where(M)[0]: the first dimension's indices
        lines = [] if mask == expression_code(where_mask) else [f"{mask} = {expression_code(where_mask)}"]
        lines.append(f"{expression_code(target)} = torch.unravel_index(torch.arange({mask}.numel(), "
                     f"device={mask}.device), {mask}.shape){first}")
        statements = [cst.parse_statement(line + "\n") for line in lines]
        statements[0] = statements[0].with_changes(leading_lines=original_node.leading_lines)
        return cst.FlattenSentinel(statements)

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> cst.BaseExpression:
        return updated_node.value if any(original_node is n for n in self.parts.row_numbers) else updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if original_node is not self.parts.sink:
            return updated_node
        assert isinstance(updated_node.func, cst.Attribute)  # _sink chose an attribute call
        into, value = expression_code(updated_node.func.value), expression_code(updated_node.args[2].value)
        routed = f"({self.mask_name} != 0).reshape(-1, *([1] * ({into}.dim() - 1)))"
        kept = cst.parse_expression(f"torch.where({routed}, {value}, 0)")
        return updated_node.with_changes(args=[*updated_node.args[:2], updated_node.args[2].with_changes(value=kept)])

    def leave_For(self, original_node: cst.For, updated_node: cst.For) -> cst.For:
        if original_node is not self.parts.loop:
            return updated_node
        return updated_node.with_changes(iter=cst.parse_expression(f"range({atom(self.parts.hit)}.shape[0])"))


def dense_expert_loop(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    for function in reversed(functions_around(module, site.line)):
        for expert_loop in _expert_loops(module, function):
            if not _spans(module, site, expert_loop):
                continue
            mask = expert_loop.mask
            name = mask.value if isinstance(mask, cst.Name) else _unused(function, "routed")
            rewritten = module.visit(_Densify(expert_loop, name, module))
            assert isinstance(rewritten, cst.Module)
            line = positions(module)[expert_loop.loop].start.line
            return Rewrite(
                "dense-expert-loop",
                f"run every expert on every token slot and keep the routed ones with torch.where (the loop at line "
                f"{line}); denser: each expert computes on every position of its routing mask, not only on its routed "
                "tokens, about as many times the loop's work as there are experts",
                "the experts hit and the tokens routed come from nonzero()/torch.where, whose sizes only the data "
                "decides, which ends the graph", line, ensure_import(rewritten, "torch").code)
    return None
