"""A tensor's value read out as a Python number: ``.item()``, ``int(t)``, ``float(t)``.

Two cases, two answers:

- ``keep-tensor``: the number only flows into arithmetic (``x * t.sum().item()``, or
  ``n = t.item()`` whose every later use is an operand of ``+ - * / ...``): keep the 0-d tensor,
  drop ``.item()`` / ``int(...)``, and the graph never needs the value.
- ``check-size``: the number becomes a size (``x[:n]``, ``torch.zeros(n)``, ``x.view(n, -1)``):
  with scalar capture on, Dynamo keeps it as a symbol but cannot guard on it ("Could not guard
  on data-dependent expression"); ``torch._check(n >= 0)`` (and ``torch._check(n <=
  x.shape[d])`` for a slice of ``x``) right after the assignment tell it what it needs, on the
  user's own variable. (``torch._check_is_size(n)`` says the same to older torch, but torch 2.13
  warns that it will be removed and names ``_check(n >= 0)`` as its replacement.)

Declined: a number that is returned, compared, passed to a call, or used as a size (for
keep-tensor); a name assigned more than once or already checked (for check-size).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import libcst as cst

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.locate import (
    dotted_name,
    ensure_import,
    expression_code,
    functions_around,
    mentions,
    parents,
    positions,
    replace,
    replace_run,
    statements_at,
    walk,
)

_ITEM_WORDS = ("item()", "item", "capture_scalar_outputs", "data-dependent", "data dependent", "unbacked", "tolist")
_SIZE_WORDS = ("could not guard on data-dependent", "data-dependent", "data dependent", "unbacked", "guard_scalar",
               "size-like", "item()")
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Power, cst.Modulo)
# calls whose arguments are sizes
_SIZE_CALLS = {"zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange", "view", "reshape", "expand",
               "repeat", "narrow", "new_zeros", "new_ones", "new_empty", "new_full", "split", "unflatten", "resize_"}


def scalar_read(expression: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor behind ``t.item()`` / ``int(t)`` / ``float(t)``, or None for any other expression."""
    if not isinstance(expression, cst.Call):
        return None
    if isinstance(expression.func, cst.Attribute) and expression.func.attr.value == "item" and not expression.args:
        return expression.func.value
    if dotted_name(expression.func) in ("int", "float") and len(expression.args) == 1 and \
            expression.args[0].keyword is None and not expression.args[0].star and plainly_tensor(expression.args[0].value):
        return expression.args[0].value
    return None


_TENSOR_METHODS = {"sum", "mean", "max", "min", "amax", "amin", "prod", "argmax", "argmin", "count_nonzero", "norm",
                   "std", "var", "any", "all", "abs", "long", "int", "float", "round", "ceil", "floor", "squeeze", "clone"}


def plainly_tensor(expression: cst.BaseExpression) -> bool:
    """``t.sum()``, ``(x > 0).sum()``, ``torch.count_nonzero(m)``, ``x[0]`` of a call: an expression that is
    a tensor whatever the names stand for (``int(n)`` on a plain name is declined: n may be a float)."""
    if isinstance(expression, cst.Call):
        name = dotted_name(expression.func)
        if name.startswith("torch.") and name.count(".") == 1:
            return True
        return isinstance(expression.func, cst.Attribute) and expression.func.attr.value in _TENSOR_METHODS
    if isinstance(expression, cst.Subscript):
        return plainly_tensor(expression.value)
    return False


class _DropReads(cst.CSTTransformer):
    def __init__(self, int_of_any: bool) -> None:
        self.dropped = 0
        self.int_of_any = int_of_any

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        tensor = scalar_read(updated_node)
        if tensor is None and self.int_of_any and dotted_name(updated_node.func) == "int" and len(updated_node.args) == 1 \
                and updated_node.args[0].keyword is None and not updated_node.args[0].star:
            tensor = updated_node.args[0].value
        if tensor is None:
            return updated_node
        self.dropped += 1
        return tensor


def without_scalar_reads(expression: cst.BaseExpression, *, int_of_any: bool = False) -> cst.BaseExpression | None:
    """``expression`` with every ``t.item()`` / ``int(t)`` / ``float(t)`` replaced by the tensor ``t``
    (``lengths.max().item() <= n`` → ``lengths.max() <= n``): the same comparison, kept a tensor; None
    when it reads no number out of a tensor. ``int_of_any``: ``int(n)`` of a plain name too, where the
    result is used as an int either way (a shift, an offset: a Python int works in the tensor form)."""
    dropping = _DropReads(int_of_any)
    kept = expression.visit(dropping)
    if dropping.dropped == 0 or not isinstance(kept, cst.BaseExpression):
        return None
    return kept


# ---- keep-tensor ---------------------------------------------------------------------------------

def _arithmetic_operand(node: cst.CSTNode, holders: Mapping[cst.CSTNode, cst.CSTNode]) -> bool:
    """Whether ``node`` is an operand of ``+ - * / ...`` whose other side is not a bare number, inside an
    expression that is not a size, a condition or a call's argument."""
    holder = holders.get(node)
    if not isinstance(holder, cst.BinaryOperation) or not isinstance(holder.operator, _ARITHMETIC):
        return False
    other = holder.right if holder.left is node else holder.left
    if isinstance(other, (cst.Integer, cst.Float, cst.SimpleString)):
        return False
    # climb the arithmetic; what holds it decides
    top: cst.CSTNode = holder
    while isinstance(holders.get(top), cst.BinaryOperation):
        top = holders[top]
    outer = holders.get(top)
    return isinstance(outer, (cst.Assign, cst.AugAssign, cst.Return, cst.Expr)) or \
        (isinstance(outer, cst.Arg) and dotted_name(_call_of(outer, holders)).startswith("torch."))


def _call_of(argument: cst.Arg, holders: Mapping[cst.CSTNode, cst.CSTNode]) -> cst.BaseExpression:
    call = holders.get(argument)
    return call.func if isinstance(call, cst.Call) else cst.Name("_")


def uses_after(module: cst.Module, function: cst.FunctionDef, name: str, after: cst.CSTNode) -> Iterator[cst.Name]:
    where = positions(module)
    start = where[after].end
    for node in walk(function.body):
        if isinstance(node, cst.Name) and node.value == name and (where[node].start.line, where[node].start.column) > \
                (start.line, start.column):
            yield node


class ScalarAssignment:
    """``name = value`` alone on a statement at a break's line, ``name`` assigned nowhere else in
    its function: the start of a read whose value flows on (into checks, into a branch)."""

    def __init__(self, statement: cst.SimpleStatementLine, small: cst.Assign, name: str,
                 function: cst.FunctionDef) -> None:
        self.statement, self.small, self.name, self.function = statement, small, name, function

    def uses_after(self, module: cst.Module) -> list[cst.Name]:
        return list(uses_after(module, self.function, self.name, self.statement))


def assignments_at(module: cst.Module, site: BreakSite) -> Iterator[ScalarAssignment]:
    """Each single-name assignment at the break's line that is the name's only one in its function."""
    functions = functions_around(module, site.line)
    for statement in statements_at(module, site.line) if functions else []:
        small = statement.body[0] if len(statement.body) == 1 else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)):
            continue
        name = small.targets[0].target.value
        if len(assignments_of(functions[-1], name)) == 1:
            yield ScalarAssignment(statement, small, name, functions[-1])


def assignments_of(function: cst.FunctionDef, name: str) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    for node in walk(function.body):
        if isinstance(node, cst.AssignTarget) and name in {n.value for n in walk(node.target) if isinstance(n, cst.Name)}:
            found.append(node)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name) and node.target.value == name:
            found.append(node)
        elif isinstance(node, (cst.For, cst.CompFor)) and name in {n.value for n in walk(node.target) if isinstance(n, cst.Name)}:
            found.append(node)
    return found


def keep_tensor(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    if not mentions(site, *_ITEM_WORDS):
        return None
    functions = functions_around(module, site.line)
    if not functions:
        return None
    function = functions[-1]
    for statement in statements_at(module, site.line):
        reads = [node for node in walk(statement) if isinstance(node, cst.Call) and scalar_read(node) is not None]
        if len(reads) != 1:
            continue
        holders = parents(module)
        read = reads[0]
        tensor = scalar_read(read)
        assert tensor is not None
        if _arithmetic_operand(read, holders):
            title = f"keep the tensor: drop {_read_kind(read)} inside the arithmetic (line {site.line})"
        else:
            small = statement.body[0] if len(statement.body) == 1 else None
            if not (isinstance(small, cst.Assign) and small.value is read and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)):
                continue
            name = small.targets[0].target.value
            uses = list(uses_after(module, function, name, statement))
            if not uses or len(assignments_of(function, name)) != 1 or not all(_arithmetic_operand(use, holders) for use in uses):
                continue
            title = f"keep {name} a tensor: drop {_read_kind(read)}, it only feeds tensor arithmetic (line {site.line})"
        kept = tensor.with_changes(lpar=[], rpar=[]) if isinstance(tensor, (cst.Call, cst.Name, cst.Attribute)) else tensor
        rewritten = replace(module, read, kept)
        return Rewrite("keep-tensor", title, "the value is read out of the tensor as a Python number, which ends the graph",
                       site.line, rewritten.code)
    return None


def _read_kind(read: cst.Call) -> str:
    name = dotted_name(read.func)
    return f"{name}(...)" if name in ("int", "float") else ".item()"


# ---- check-size ----------------------------------------------------------------------------------

def _size_uses(function: cst.FunctionDef, name: str) -> tuple[bool, list[tuple[str, int]]]:
    """(whether ``name`` is used as a size, the (tensor, dim) pairs it slices as an upper bound)."""
    as_size = False
    bounds: list[tuple[str, int]] = []
    for node in walk(function.body):
        if isinstance(node, cst.Subscript):
            for dim, element in enumerate(node.slice):
                part = element.slice
                if isinstance(part, cst.Slice) and isinstance(part.upper, cst.Name) and part.upper.value == name:
                    as_size = True
                    tensor = dotted_name(node.value)
                    if tensor and all(isinstance(e.slice, (cst.Slice, cst.Index)) and not (
                            isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Ellipsis)) for e in node.slice[:dim]):
                        if (tensor, dim) not in bounds:
                            bounds.append((tensor, dim))
                elif isinstance(part, cst.Slice) and any(isinstance(b, cst.Name) and b.value == name for b in (part.lower, part.step)):
                    as_size = True
        elif isinstance(node, cst.Call) and dotted_name(node.func).rpartition(".")[2] in _SIZE_CALLS:
            if any(isinstance(arg.value, cst.Name) and arg.value.value == name for arg in node.args):
                as_size = True
    return as_size, bounds


def _assignment_of(function: cst.FunctionDef, line: int, module: cst.Module) -> Iterator[tuple[cst.SimpleStatementLine, str]]:
    """(statement, name) for ``name = <scalar read>`` at ``line``, or for each name the statement at ``line``
    reads that such a statement set earlier in the function."""
    where = positions(module)
    reads_here = {node.value for statement in statements_at(module, line) for node in walk(statement) if isinstance(node, cst.Name)}
    for node in walk(function.body):
        if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1 or not isinstance(node.body[0], cst.Assign):
            continue
        assign = node.body[0]
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name) or scalar_read(assign.value) is None:
            continue
        if isinstance(assign.value.func, cst.Name) and assign.value.func.value == "float":  # type: ignore[attr-defined]
            continue  # a float is no size
        name = assign.targets[0].target.value
        span = where[node]
        if span.start.line <= line <= span.end.line or (span.end.line < line and name in reads_here):
            yield node, name


def check_size(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    if not mentions(site, *_SIZE_WORDS):
        return None
    functions = functions_around(module, site.line)
    if not functions:
        return None
    function = functions[-1]
    for statement, name in _assignment_of(function, site.line, module):
        if len(assignments_of(function, name)) != 1 or _already_checked(function, name):
            continue
        as_size, bounds = _size_uses(function, name)
        if not as_size:
            continue
        checks = [f"torch._check({name} >= 0)", *(f"torch._check({name} <= {tensor}.shape[{dim}])" for tensor, dim in bounds)]
        added = [_plain_statement(code) for code in checks]
        rewritten = ensure_import(replace_run(module, statement, 1, [statement, *added]), "torch")
        return Rewrite("check-size", f"tell torch {name} is a valid size: {'; '.join(checks)} after line "
                       f"{positions(module)[statement].start.line}",
                       f"{name} is read out of a tensor and used as a size, and torch cannot prove it is one", site.line,
                       rewritten.code, settings=("capture_scalar_outputs",))
    return None


def _already_checked(function: cst.FunctionDef, name: str) -> bool:
    return any(isinstance(node, cst.Call) and dotted_name(node.func) in ("torch._check_is_size", "torch._check")
               and any(isinstance(n, cst.Name) and n.value == name for n in walk(node)) for node in walk(function.body))


def _plain_statement(code: str) -> cst.SimpleStatementLine:
    statement = cst.parse_statement(code + "\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement


__all__ = ["assignments_of", "check_size", "expression_code", "keep_tensor", "scalar_read", "uses_after",
           "without_scalar_reads"]
