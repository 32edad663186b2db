"""``assert <cond>`` and validation guards (``if <cond>: raise ValueError(...)``) in compiled code.

Dynamo cannot branch on a value it does not know while tracing. Both statements are checks,
not choices, so they can become checks torch keeps inside the graph:

- on a tensor (torch said "Data-dependent branching"): ``torch._assert_async(cond, "msg")``, an
  operator that fails the run when the tensor is false; ``torch._check`` would refuse a tensor;
- on a data-dependent number (torch said "Could not guard on data-dependent expression" or a
  data-dependent assertion): ``torch._check(cond, lambda: msg)``, which tells the symbolic-shape
  machinery the fact instead of guarding on it.

Either way a failed check raises RuntimeError, not the original exception: the guard's title
says so. Declined: messages the operator cannot carry (an f-string for a tensor check),
exceptions raised with anything but one message, ``if`` statements with an ``else``.

By shape, whatever torch's label: a condition that reads a number out of a tensor
(``assert lengths.max().item() <= slen, "too long"``; ``if int(t.sum()) == 0: raise``) becomes
the same check on the tensor, the read dropped (``torch._assert_async(lengths.max() <= slen,
"too long")``): no setting needed, the graph stays whole. ``torch._check(u <= slen, lambda: msg)``
would need ``capture_scalar_outputs`` and, like the operator, takes only a constant message:
torch 2.13 cannot convert a closure that formats values ("Can't convert torch._check*() message
closure", gb9158), so a computed message is left out and the title says so.
Declined there: ``or`` / ``not`` / chained comparisons around the number. ``assert a and b, msg`` (either form)
becomes one check per operand, in order, each with the message: what ``assert`` checks, without asking Python
for the truth of a tensor in between.
"""

from __future__ import annotations

from typing import Literal

import libcst as cst

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.locate import (
    comment_lines,
    dotted_name,
    ensure_import,
    expression_code,
    ifs_at,
    mentions,
    parents,
    replace_each,
    replace_run,
    statements_at,
    walk,
)
from dynscope.rewrites.scalar_sizes import assignments_at, without_scalar_reads

Form = Literal["tensor", "symbolic"]
_TENSOR_WORDS = ("data-dependent branching", "generic_jump", "jump")
_SYMBOLIC_WORDS = ("could not guard on data-dependent", "data-dependent assertion", "data dependent", "symbolic shape",
                   "guard_scalar", "unbacked")
_STRINGS = (cst.SimpleString, cst.ConcatenatedString)


def _form(site: BreakSite) -> Form | None:
    if not (site.gb_type or site.reason).strip():
        return "tensor"  # no text: a check on a tensor is the common case
    if mentions(site, *_TENSOR_WORDS):
        return "tensor"
    if mentions(site, *_SYMBOLIC_WORDS):
        return "symbolic"
    return None


def _message_lambda(message: cst.BaseExpression) -> str:
    text = expression_code(message)
    is_text = isinstance(message, (*_STRINGS, cst.FormattedString))
    return f"lambda: {text}" if is_text else f"lambda: str({text})"


def _negated(condition: cst.BaseExpression) -> str:
    text = expression_code(condition)
    if isinstance(condition, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Comparison)) or condition.lpar:
        return f"not {text}"
    return f"not ({text})"


def _check_call(form: Form, condition: str, message: cst.BaseExpression | None, *, negate_tensor: bool) -> str | None:
    if form == "symbolic":
        return f"torch._check({condition}, {_message_lambda(message)})" if message is not None else f"torch._check({condition})"
    if negate_tensor:
        condition = f"torch.logical_not({condition})"
    if message is None:
        return f"torch._assert_async({condition})"
    if not isinstance(message, _STRINGS):
        return None  # the operator takes a fixed string
    return f"torch._assert_async({condition}, {expression_code(message)})"


def _statement(code: str, like: cst.SimpleStatementLine | cst.If) -> cst.SimpleStatementLine:
    statement = cst.parse_statement(code + "\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    if isinstance(like, cst.SimpleStatementLine):
        return statement.with_changes(leading_lines=like.leading_lines, trailing_whitespace=like.trailing_whitespace)
    return statement.with_changes(leading_lines=[*like.leading_lines, *comment_lines(like.test, like.body)])


_READ_CAUSE = "the condition reads a number out of a tensor (.item(), int(t)), which ends the graph"


def _tensor_check(kept: cst.BaseExpression, message: cst.BaseExpression | None, *, negate: bool) -> str | None:
    """``torch._assert_async`` on ``kept`` (a condition that is a tensor; negated for a guard), or None when it
    mixes in Python logic a tensor cannot stand for. A computed message is left out: torch 2.13 converts only a
    constant message closure (gb9158)."""
    if any(isinstance(node, (cst.BooleanOperation, cst.Not, cst.IfExp)) or (
            isinstance(node, cst.Comparison) and len(node.comparisons) > 1) for node in walk(kept)):
        return None  # `and`, `not`, `a < b < c` on a tensor ask Python for a bool again
    tensor = expression_code(kept.with_changes(lpar=[], rpar=[]) if isinstance(kept, cst.Comparison) else kept)
    tensor = f"torch.logical_not({tensor})" if negate else tensor
    text = f", {expression_code(message)}" if isinstance(message, _STRINGS) else ""
    return f"torch._assert_async({tensor}{text})"


def _on_read_number(condition: cst.BaseExpression, message: cst.BaseExpression | None, *, negate: bool) -> str | None:
    """The tensor check for ``condition`` with its reads of numbers out of tensors dropped, when it has any."""
    kept = without_scalar_reads(condition)
    return None if kept is None else _tensor_check(kept, message, negate=negate)


def _dropped(message: cst.BaseExpression | None) -> str:
    return "" if message is None or isinstance(message, _STRINGS) else \
        "; its computed message is left out (torch's checks take only a constant one)"


def _and_operands(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``[a, b, c]`` of ``assert a and b and c``: checked one by one, in order, as ``assert`` does; ``[test]``
    otherwise."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _and_operands(test.left) + _and_operands(test.right)
    return [test]


def _checks(codes: list[str | None], statement: cst.SimpleStatementLine) -> list[cst.BaseStatement] | None:
    """One statement per check (the first keeps the assert's comments), or None when an operand had none."""
    if not codes or any(code is None for code in codes):
        return None
    return [_statement(code, statement) if i == 0 else cst.parse_statement(f"{code}\n")
            for i, code in enumerate(codes) if code is not None]


def _split(operands: list[cst.BaseExpression]) -> str:
    return f", one check per operand of `and` ({len(operands)})" if len(operands) > 1 else ""


def _assert_on_read(module: cst.Module, statement: cst.SimpleStatementLine, check: cst.Assert, line: int) -> Rewrite | None:
    operands = _and_operands(check.test)
    checks = _checks([_on_read_number(operand, check.msg, negate=False) for operand in operands], statement)
    if checks is None:
        return None
    rewritten = ensure_import(replace_run(module, statement, 1, checks), "torch")
    return Rewrite("assert-to-check", "assert with torch._assert_async on the tensor instead of Python's assert on a "
                   f"number read out of it (line {line}){_split(operands)}{_dropped(check.msg)}", _READ_CAUSE, line,
                   rewritten.code)


def _check_holding(module: cst.Module, use: cst.Name) -> tuple[cst.SimpleStatementLine | cst.If, str] | None:
    """(the assert or validation guard whose condition reads ``use``, its tensor check) or None."""
    holders = parents(module)
    node: cst.CSTNode = use
    while node in holders and not isinstance(node, (cst.SimpleStatementLine, cst.If)):
        holder = holders[node]
        if isinstance(holder, cst.Assert) and holder.test is node:
            statement = holders.get(holder)
            if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
                return None
            code = _tensor_check(holder.test, holder.msg, negate=False)
            return None if code is None else (statement, code)
        if isinstance(holder, cst.If) and holder.test is node:
            raised = _raised_message(holder)
            code = None if raised is None else _tensor_check(holder.test, raised[1], negate=True)
            return None if code is None else (holder, code)
        node = holder
    return None


def _read_flowing_into_checks(module: cst.Module, site: BreakSite) -> Rewrite | None:
    """``m = lengths.max().item()`` at the break, ``m`` read only by asserts / validation guards after it: ``m`` kept
    a tensor (the read dropped) and each check on it made a tensor check."""
    for assigned in assignments_at(module, site):
        small, name = assigned.small, assigned.name
        kept = without_scalar_reads(small.value)
        if kept is None:
            continue
        uses = assigned.uses_after(module)
        checks = [_check_holding(module, use) for use in uses]
        if not uses or any(check is None for check in checks):
            continue
        new: dict[cst.CSTNode, cst.CSTNode] = {small: small.with_changes(value=kept)}
        for check in checks:
            assert check is not None
            holder, code = check
            new[holder] = _statement(code, holder)
        rewritten = replace_each(module, new)
        return Rewrite("assert-to-check", f"keep {name} a tensor and check it with torch._assert_async where it is "
                       f"checked (line {site.line})", f"{name} is read out of a tensor only to be checked, which ends the graph",
                       site.line, ensure_import(rewritten, "torch").code)
    return None


def assert_to_check(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    flowing = _read_flowing_into_checks(module, site)
    if flowing is not None:
        return flowing
    form = _form(site)
    for statement in statements_at(module, site.line):
        if len(statement.body) != 1 or not isinstance(statement.body[0], cst.Assert):
            continue
        check = statement.body[0]
        by_shape = _assert_on_read(module, statement, check, site.line)
        if by_shape is not None or form is None:
            return by_shape
        operands = _and_operands(check.test)
        if form == "tensor" and any(isinstance(operand, cst.BooleanOperation) for operand in operands):
            return None  # `a or b` on tensors asks Python for a bool again
        checks = _checks([_check_call(form, expression_code(operand), check.msg, negate_tensor=False)
                          for operand in operands], statement)
        if checks is None:
            return None
        rewritten = ensure_import(replace_run(module, statement, 1, checks), "torch")
        function = "torch._check" if form == "symbolic" else "torch._assert_async"
        return Rewrite("assert-to-check", f"assert with {function} instead of Python's assert (line {site.line})"
                       f"{_split(operands)}", "assert asks Python for the truth of a value Dynamo only knows at run time",
                       site.line, rewritten.code)
    return None


def _raised_message(branch: cst.If) -> tuple[str, cst.BaseExpression | None] | None:
    """(exception name, its message) when the ``if``'s whole body is ``raise SomeError(msg)``."""
    body = branch.body
    if not isinstance(body, cst.IndentedBlock) or len(body.body) != 1 or branch.orelse is not None:
        return None
    line = body.body[0]
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or not isinstance(line.body[0], cst.Raise):
        return None
    raised = line.body[0].exc
    if not isinstance(raised, cst.Call) or line.body[0].cause is not None:
        return None
    name = dotted_name(raised.func)
    if not name.rpartition(".")[2].endswith(("Error", "Exception")):
        return None
    if len(raised.args) > 1 or any(arg.keyword is not None or arg.star for arg in raised.args):
        return None
    return name, (raised.args[0].value if raised.args else None)


def _guard_on_read(module: cst.Module, branch: cst.If, exception: str, message: cst.BaseExpression | None,
                   line: int) -> Rewrite | None:
    code = _on_read_number(branch.test, message, negate=True)
    if code is None:
        return None
    rewritten = ensure_import(replace_run(module, branch, 1, [_statement(code, branch)]), "torch")
    return Rewrite("guard-to-check", f"check with torch._assert_async on the tensor instead of raising {exception} on a "
                   f"number read out of it (line {line}); under compile a failed check raises RuntimeError, not {exception}"
                   f"{_dropped(message)}", _READ_CAUSE, line, rewritten.code)


def guard_to_check(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    form = _form(site)
    for branch in reversed(ifs_at(module, site.line)):
        raised = _raised_message(branch)
        if raised is None:
            continue
        exception, message = raised
        by_shape = _guard_on_read(module, branch, exception, message, site.line)
        if by_shape is not None or form is None:
            return by_shape
        if form == "tensor":
            if isinstance(branch.test, cst.BooleanOperation):
                return None
            code = _check_call(form, expression_code(branch.test), message, negate_tensor=True)
        else:
            code = _check_call(form, _negated(branch.test), message, negate_tensor=False)
        if code is None:
            return None
        rewritten = ensure_import(replace_run(module, branch, 1, [_statement(code, branch)]), "torch")
        function = "torch._check" if form == "symbolic" else "torch._assert_async"
        return Rewrite("guard-to-check",
                       f"check with {function} instead of raising {exception} (line {site.line}); "
                       f"under compile a failed check raises RuntimeError, not {exception}",
                       "the validation branches on a value Dynamo only knows at run time", site.line, rewritten.code)
    return None
