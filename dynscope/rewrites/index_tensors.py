"""Indices and offsets read out of a tensor one number at a time, where torch has a tensor form.

Both rules match the code's shape, whatever torch's label (torch 2.13 files the same code as an
``.item()`` break, a "Data dependent operator" or, under fullgraph, an unbacked index):

- ``index-select-comprehension``: a list comprehension indexing one dimension with each element
  of an index tensor, ``[x[:, idx[i]] for i in range(len(idx))]`` (also ``idx[i].item()``,
  ``int(idx[i])``, ``range(k)`` → ``idx[:k]``, ``for i in idx.tolist()``, ``x[:, int(i)] for i in
  idx``) → ``list(x.index_select(1, idx).unbind(1))``: one gather, the same tensors in the same
  order. The dimension is the position of the index after full ``:`` slices.
- ``tensor-offset``: ``int(t)`` / ``t.item()`` as the shift of ``roll`` or the start of ``narrow``:
  ``torch.roll(x, shifts=-int(t), dims=0)`` → ``x.index_select(0, (torch.arange(x.shape[0],
  device=x.device) - (-t)) % x.shape[0])`` (roll's own definition: out[j] = x[(j - s) mod n]);
  ``x.narrow(0, int(t), 4)`` → ``x.narrow(0, t, 4)`` (narrow takes a 0-d tensor start). Where the
  number flows: at ``shift = int(t)`` whose every later use is (part of) such a shift or start, ``shift``
  stays a tensor (``shift = t``) and the rolls take the tensor form.

Declined: a comprehension with a condition or a second ``for``, an index that is not the loop's
element, the indexed tensor reading the loop variable, an ellipsis before the index; a roll
without one literal ``dims`` (the flattened roll), several shifts, a number read in narrow's length
(a size must be a Python int).
"""

from __future__ import annotations

import libcst as cst

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.locate import (
    block_holding,
    dotted_name,
    ensure_import,
    expression_code,
    functions_around,
    names_in,
    nodes_of_kind,
    parents,
    replace,
    replace_each,
    replace_run,
    statements_at,
    walk,
)
from dynscope.rewrites.scalar_sizes import assignments_of, scalar_read, uses_after, without_scalar_reads

_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


def atom(expression: cst.BaseExpression) -> str:
    """The expression's code, parenthesised unless it is a name, attribute, call or subscript."""
    code = expression_code(expression)
    return code if isinstance(expression, _ATOMS) or expression.lpar else f"({code})"


def _read_dropped(expression: cst.BaseExpression) -> cst.BaseExpression:
    tensor = scalar_read(expression)
    if tensor is None and isinstance(expression, cst.Call) and dotted_name(expression.func) == "int" and \
            len(expression.args) == 1 and not expression.args[0].keyword and not expression.args[0].star:
        tensor = expression.args[0].value  # int(idx[i]), int(i): the loop decides that it is a tensor's element
    return expression if tensor is None else tensor


# ---- index-select-comprehension ------------------------------------------------------------------

def _indexed_dim(subscript: cst.Subscript) -> tuple[int, cst.BaseExpression] | None:
    """(the dimension, the index) of ``x[:, :, index, :]``: one index, every other element a full slice."""
    found: tuple[int, cst.BaseExpression] | None = None
    for dim, element in enumerate(subscript.slice):
        part = element.slice
        if isinstance(part, cst.Slice) and part.lower is None and part.upper is None and part.step is None:
            continue
        if found is not None or not isinstance(part, cst.Index) or isinstance(part.value, cst.Ellipsis) or part.star:
            return None
        found = dim, part.value
    return found


def _length_of(expression: cst.BaseExpression) -> str:
    """The tensor ``len(t)`` / ``t.shape[0]`` / ``t.size(0)`` / ``t.numel()`` is the length of; "" for another count."""
    if isinstance(expression, cst.Call) and len(expression.args) <= 1:
        name = dotted_name(expression.func)
        args = [expression_code(arg.value) for arg in expression.args]
        if name == "len" and len(args) == 1 and dotted_name(expression.args[0].value):
            return args[0]
        if (name.endswith(".size") and args == ["0"]) or (name.endswith(".numel") and not args):
            return name.rpartition(".")[0]
    if isinstance(expression, cst.Subscript) and len(expression.slice) == 1 and \
            isinstance(expression.slice[0].slice, cst.Index) and expression_code(expression.slice[0].slice.value) == "0":
        name = dotted_name(expression.value)
        if name.endswith(".shape"):
            return name.rpartition(".")[0]
    return ""


def _index_tensor(loop: cst.CompFor, index: cst.BaseExpression) -> str | None:
    """The code of the index tensor whose elements ``loop`` feeds to ``index``, or None."""
    if not isinstance(loop.target, cst.Name) or loop.ifs or loop.inner_for_in is not None or loop.asynchronous:
        return None
    variable = loop.target.value
    element = _read_dropped(index)
    iterated = loop.iter
    if isinstance(iterated, cst.Call) and dotted_name(iterated.func) == "range" and len(iterated.args) == 1:
        # idx[i] for i in range(n)
        if not (isinstance(element, cst.Subscript) and len(element.slice) == 1 and isinstance(element.slice[0].slice, cst.Index)
                and expression_code(element.slice[0].slice.value) == variable and dotted_name(element.value)):
            return None
        tensor = dotted_name(element.value)
        count = iterated.args[0].value
        return tensor if _length_of(count) == tensor else f"{tensor}[:{expression_code(count)}]"
    if not (isinstance(element, cst.Name) and element.value == variable):
        return None
    if isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute) and iterated.func.attr.value == "tolist" \
            and not iterated.args and dotted_name(iterated.func.value):
        return dotted_name(iterated.func.value)  # x[:, i] for i in idx.tolist()
    if element is not index and dotted_name(iterated):
        return dotted_name(iterated)  # x[:, int(i)] for i in idx: int() says the elements are a tensor's
    return None


def index_select_comprehension(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    for comprehension, span in nodes_of_kind(module, cst.ListComp):
        if not span.start.line <= site.line <= span.end.line or not isinstance(comprehension.elt, cst.Subscript):
            continue
        picked = _indexed_dim(comprehension.elt)
        if picked is None:
            continue
        dim, index = picked
        tensor = _index_tensor(comprehension.for_in, index)
        source = comprehension.elt.value
        target = comprehension.for_in.target
        if tensor is None or not isinstance(target, cst.Name) or target.value in names_in(source):
            continue
        code = f"list({atom(source)}.index_select({dim}, {tensor}).unbind({dim}))"
        rewritten = replace(module, comprehension, cst.parse_expression(code))
        return Rewrite("index-select-comprehension",
                       f"gather with index_select and unbind instead of indexing with each element of {tensor} (line {site.line})",
                       "each element of an index tensor is read out to index with, one graph break (or unbacked index) each",
                       site.line, rewritten.code)
    return None


# ---- tensor-offset -------------------------------------------------------------------------------

def _argument(call: cst.Call, position: int, keyword: str) -> cst.Arg | None:
    for index, arg in enumerate(call.args):
        if arg.star:
            return None
        if (arg.keyword is None and index == position) or (arg.keyword is not None and arg.keyword.value == keyword):
            return arg
    return None


def _roll_parts(call: cst.Call) -> tuple[cst.BaseExpression, cst.Arg, cst.Arg] | None:
    """(the rolled tensor, the shift argument, a literal ``dims`` argument) of ``torch.roll(x, s, d)`` / ``x.roll(s, d)``."""
    name = dotted_name(call.func)
    if name == "torch.roll":
        first = _argument(call, 0, "input")
        offset = 1
    elif isinstance(call.func, cst.Attribute) and call.func.attr.value == "roll" and not name.startswith("torch."):
        first, offset = cst.Arg(call.func.value), 0
    else:
        return None
    shift, dims = _argument(call, offset, "shifts"), _argument(call, offset + 1, "dims")
    if first is None or shift is None or dims is None or len(call.args) != offset + 2:
        return None
    literal = isinstance(dims.value, cst.Integer) or (isinstance(dims.value, cst.UnaryOperation) and isinstance(
        dims.value.operator, cst.Minus) and isinstance(dims.value.expression, cst.Integer))
    return (first.value, shift, dims) if literal else None


def _rolled(tensor_code: cst.BaseExpression, shift: cst.BaseExpression, dims: cst.Arg) -> cst.BaseExpression:
    """roll's definition on a tensor shift: out[j] = x[(j - s) mod n] along the one dimension."""
    tensor, dim = atom(tensor_code), expression_code(dims.value)
    length = f"{tensor}.shape[{dim}]"
    return cst.parse_expression(
        f"{tensor}.index_select({dim}, (torch.arange({length}, device={tensor}.device) - {atom(shift)}) % {length})")


def _roll(call: cst.Call) -> cst.BaseExpression | None:
    """The tensor form of a roll whose shift reads a number out of a tensor."""
    parts = _roll_parts(call)
    kept = without_scalar_reads(parts[1].value, int_of_any=True) if parts is not None else None
    return None if parts is None or kept is None else _rolled(parts[0], kept, parts[2])


def _narrow_start(call: cst.Call) -> cst.Arg | None:
    """The start argument of ``x.narrow(d, start, n)`` / ``torch.narrow(x, d, start, n)`` whose length reads no number."""
    name = dotted_name(call.func)
    offset = 1 if name == "torch.narrow" else 0
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "narrow") or \
            (offset == 0 and name.startswith("torch.")) or len(call.args) != offset + 3:
        return None
    start, length = _argument(call, offset + 1, "start"), _argument(call, offset + 2, "length")
    if start is None or length is None or without_scalar_reads(length.value, int_of_any=True) is not None:
        return None
    return start


def _narrow(call: cst.Call) -> cst.Call | None:
    """``x.narrow(d, int(t), n)`` / ``torch.narrow(x, d, int(t), n)`` with the start kept a tensor."""
    start = _narrow_start(call)
    tensor = without_scalar_reads(start.value, int_of_any=True) if start is not None else None
    if tensor is None:
        return None
    return call.with_changes(args=[arg.with_changes(value=tensor) if arg is start else arg for arg in call.args])


def _offset_use(module: cst.Module, use: cst.Name) -> tuple[cst.Call, cst.BaseExpression | None] | None:
    """(the roll or narrow whose shift or start ``use`` is part of, the roll's tensor form or None for a narrow,
    which takes the tensor as it is), or None for any other use."""
    holders = parents(module)
    node: cst.CSTNode = use
    while isinstance(holders.get(node), (cst.BinaryOperation, cst.UnaryOperation)):
        node = holders[node]
    arg = holders.get(node)
    call = holders.get(arg) if isinstance(arg, cst.Arg) else None
    if not isinstance(arg, cst.Arg) or not isinstance(call, cst.Call):
        return None
    parts = _roll_parts(call)
    if parts is not None:
        return (call, _rolled(parts[0], parts[1].value, parts[2])) if arg is parts[1] else None
    narrowed = _narrow_start(call)
    return (call, None) if narrowed is arg else None


def _offset_flowing(module: cst.Module, site: BreakSite) -> Rewrite | None:
    """``shift = int(t)`` at the break, read only as rolls' shifts and narrows' starts: kept a tensor, the rolls made
    their tensor form."""
    functions = functions_around(module, site.line)
    for statement in statements_at(module, site.line) if functions else []:
        small = statement.body[0] if len(statement.body) == 1 else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            continue
        kept = without_scalar_reads(small.value, int_of_any=True)
        name = small.targets[0].target.value
        if kept is None or len(assignments_of(functions[-1], name)) != 1:
            continue
        uses = [_offset_use(module, use) for use in uses_after(module, functions[-1], name, statement)]
        if not uses or any(use is None for use in uses):
            continue
        new: dict[cst.CSTNode, cst.CSTNode] = {small: small.with_changes(value=kept)}
        new.update((call, rolled) for call, rolled in filter(None, uses) if rolled is not None)
        kinds = sorted({"roll with index_select by it" if rolled is not None else "narrow from it"
                        for _call, rolled in filter(None, uses)})
        return Rewrite("tensor-offset", f"keep {name} a tensor: {', '.join(kinds)} (line {site.line})",
                       _OFFSET_CAUSE, site.line, ensure_import(replace_each(module, new), "torch").code)
    return None


def tensor_offset(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    flowing = _offset_flowing(module, site)
    if flowing is not None:
        return flowing
    for statement in statements_at(module, site.line):
        for node in walk(statement):
            if not isinstance(node, cst.Call):
                continue
            rolled = _roll(node)
            if rolled is not None:
                rewritten = ensure_import(replace(module, node, rolled), "torch")
                return Rewrite("tensor-offset", f"roll with index_select on a tensor shift instead of a number read out of "
                               f"it (line {site.line})", _OFFSET_CAUSE, site.line, rewritten.code)
            narrowed = _narrow(node)
            if narrowed is not None:
                return Rewrite("tensor-offset", f"narrow from a tensor start instead of a number read out of it "
                               f"(line {site.line})", _OFFSET_CAUSE, site.line, replace(module, node, narrowed).code)
    return None


_OFFSET_CAUSE = "an offset is read out of a tensor as a Python number (.item(), int(t)), which ends the graph"


# ---- nonzero-to-where ----------------------------------------------------------------------------

_FLATTENS = ("squeeze(-1)", "squeeze(1)", "view(-1)", "reshape(-1)", "flatten()")


def nonzero_condition(expression: cst.BaseExpression) -> cst.BaseExpression | None:
    """``C`` of ``torch.nonzero(C).squeeze(-1)``, ``C.nonzero(as_tuple=True)[0]``, ``torch.where(C)[0]`` (the rows a
    1-d mask selects), or None."""
    if isinstance(expression, cst.Subscript) and len(expression.slice) == 1 and \
            isinstance(expression.slice[0].slice, cst.Index) and expression_code(expression.slice[0].slice.value) == "0":
        call = expression.value
        as_tuple = True
    elif isinstance(expression, cst.Call) and isinstance(expression.func, cst.Attribute) and \
            expression_code(expression).endswith(tuple(f".{flatten}" for flatten in _FLATTENS)):
        call = expression.func.value
        as_tuple = False
    else:
        return None
    if not isinstance(call, cst.Call):
        return None
    name = dotted_name(call.func)
    keywords = {arg.keyword.value: expression_code(arg.value) for arg in call.args if arg.keyword is not None}
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    if keywords not in (({"as_tuple": "True"},) if as_tuple and name != "torch.where" else ({}, {"as_tuple": "False"})):
        return None
    if name in ("torch.nonzero", "torch.where") and len(positional) == 1 and (name == "torch.nonzero" or as_tuple):
        return positional[0]
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "nonzero" and not positional \
            and not name.startswith("torch."):
        return call.func.value
    return None


class _DropIndex(cst.CSTTransformer):
    """``t[idx]`` → ``t``: every row instead of the selected ones."""

    def __init__(self, index: str) -> None:
        self.index = index

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> cst.BaseExpression:
        part = updated_node.slice[0].slice if len(updated_node.slice) == 1 else None
        if isinstance(part, cst.Index) and isinstance(part.value, cst.Name) and part.value.value == self.index:
            return updated_node.value
        return updated_node


def _next_statement(module: cst.Module, statement: cst.SimpleStatementLine) -> cst.BaseStatement | None:
    block = block_holding(module, statement)
    if block is None:
        return None
    index = block.index(statement)
    return block[index + 1] if index + 1 < len(block) else None


def nonzero_to_where(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    for statement in statements_at(module, site.line):
        small = statement.body[0] if len(statement.body) == 1 else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            continue
        condition = nonzero_condition(small.value)
        following = _next_statement(module, statement)
        index = small.targets[0].target.value
        if condition is None or not isinstance(following, cst.SimpleStatementLine) or len(following.body) != 1:
            continue
        write = following.body[0]
        if not (isinstance(write, cst.Assign) and len(write.targets) == 1 and isinstance(write.targets[0].target, cst.Subscript)):
            continue
        target = write.targets[0].target
        part = target.slice[0].slice if len(target.slice) == 1 else None
        if not (isinstance(part, cst.Index) and isinstance(part.value, cst.Name) and part.value.value == index) or \
                not dotted_name(target.value):
            continue
        value = write.value.visit(_DropIndex(index))
        functions = functions_around(module, site.line)
        later = list(uses_after(module, functions[-1], index, following)) if functions else [None]
        if not isinstance(value, cst.BaseExpression) or index in names_in(value) or later:
            continue  # the selection is read elsewhere: the rows it picks still matter
        name = dotted_name(target.value)
        as_bool = "" if isinstance(condition, cst.Comparison) else ".bool()"  # nonzero takes any tensor, torch.where a mask
        mask = f"{atom(condition)}{as_bool}.reshape(-1, *([1] * ({name}.dim() - 1)))"
        code = f"{name}.copy_(torch.where({mask}, {expression_code(value)}, {name}))"
        replaced = cst.parse_statement(code + "\n")
        assert isinstance(replaced, cst.SimpleStatementLine)
        replaced = replaced.with_changes(leading_lines=[*statement.leading_lines, *following.leading_lines])
        rewritten = ensure_import(replace_run(module, statement, 2, [replaced]), "torch")
        return Rewrite("nonzero-to-where", f"write every row with torch.where instead of the rows torch.nonzero selects "
                       f"(line {site.line}); denser: the new value is computed for every row, not only the selected ones",
                       "torch.nonzero's result has a size only the data decides, which ends the graph", site.line,
                       rewritten.code)
    return None
