"""Tensor idioms Dynamo refuses, and the ones it takes.

- ``drop-requires-grad``: ``t.requires_grad_()`` on an intermediate inside compiled code
  ("requires_grad_() intermediate leaked as output", "Unsupported Tensor.requires_grad_() call"):
  MRA returns ``torch.zeros_like(query).requires_grad_()`` when its kernel is missing. Dropping it
  keeps the values; whether anything needed the gradient is what the trial's outputs (and
  gradients, when the program trains) prove.
- ``deepcopy-to-clone``: ``copy.deepcopy(t)`` of a tensor → ``t.clone()`` (a fresh copy of the
  values, which is what a deepcopy of a plain tensor gives).
- ``floor-div-ints``: ``torch.div(a, b, rounding_mode="floor")`` on Python ints (sizes) makes a
  tensor of a size ("Data dependent operator"); ``a // b`` keeps a Python int.
- ``clone-repeated-input``: by shape, whatever torch's label: ``SomeFunction.apply(mask, mask, s)``,
  one tensor given twice to an ``autograd.Function`` (torch 2.13: "autograd.Function.apply: duplicate
  tensor input") → ``SomeFunction.apply(mask, mask.clone(), s)``. The same values; the gradients of
  both inputs still reach ``mask`` (clone passes its gradient through). Declined: a repeat that is not
  a plain name or attribute (a call gives a fresh tensor each time), ``None``, keyword or ``*``
  arguments. Not checked here: a function that writes its inputs in place (``mark_dirty``) would
  write the copy; the trial's equal outputs prove it does not matter.
"""

from __future__ import annotations

import libcst as cst

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.locate import (
    dotted_name,
    ensure_import,
    expression_code,
    mentions,
    parents,
    replace,
    replace_run,
    statements_at,
    walk,
)
from dynscope.rewrites.scalar_sizes import plainly_tensor


def _requires_grad_call(node: cst.CSTNode) -> cst.Call | None:
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute) or node.func.attr.value != "requires_grad_":
        return None
    if len(node.args) > 1 or (node.args and not (isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == "True")):
        return None  # requires_grad_(False) and keywords: another intent
    return node


def _requires_grad_assignment(statement: cst.SimpleStatementLine) -> str | None:
    """``x`` for the statement ``x.requires_grad = True`` (HuBERT, wav2vec2: "setattr() on Tensor.requires_grad")."""
    if len(statement.body) != 1 or not isinstance(statement.body[0], cst.Assign) or len(statement.body[0].targets) != 1:
        return None
    target = statement.body[0].targets[0].target
    value = statement.body[0].value
    if isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" and isinstance(value, cst.Name) \
            and value.value == "True":
        return expression_code(target.value)
    return None


def _plain_test(test: cst.BaseExpression) -> bool:
    """A condition with nothing to run: names, attributes, ``and`` / ``or`` / ``not``, comparisons."""
    return not any(isinstance(node, (cst.Call, cst.Subscript, cst.NamedExpr, cst.Await, cst.Yield)) for node in walk(test))


def _drop_statement(module: cst.Module, statement: cst.SimpleStatementLine) -> cst.Module | None:
    """``module`` without ``statement``: an ``if`` that held only it goes too (when its condition runs
    nothing); a block it was alone in keeps ``pass``; None when comments above it would go with it."""
    holders = parents(module)
    block = holders.get(statement)
    if isinstance(block, cst.IndentedBlock) and len(block.body) == 1:
        branch = holders.get(block)
        if isinstance(branch, cst.If) and branch.orelse is None and _plain_test(branch.test) and not any(
                isinstance(node, cst.Comment) for node in walk(branch.body)):
            siblings = holders.get(branch)
            if isinstance(siblings, (cst.IndentedBlock, cst.Module)):
                following = list(siblings.body)
                index = following.index(branch)
                blank = [line for line in branch.leading_lines if line.comment is None]
                after = following[index + 1] if index + 1 < len(following) else None
                if isinstance(after, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and blank and not after.leading_lines:
                    return replace_run(module, branch, 2, [after.with_changes(leading_lines=blank)])
                return replace_run(module, branch, 1, [])
        return replace_run(module, statement, 1, [cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=statement.leading_lines)])
    if statement.leading_lines and any(line.comment is not None for line in statement.leading_lines):
        return None
    return replace_run(module, statement, 1, [])


def drop_requires_grad(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    if not mentions(site, "requires_grad"):
        return None
    for statement in statements_at(module, site.line):
        tensor = _requires_grad_assignment(statement)
        if tensor is not None:
            dropped = _drop_statement(module, statement)
            if dropped is None:
                return None
            return Rewrite("drop-requires-grad", f"drop `{tensor}.requires_grad = True` (line {site.line})",
                           "setting requires_grad on a tensor inside the compiled code cannot be traced", site.line, dropped.code)
        calls = [call for call in map(_requires_grad_call, walk(statement)) if call is not None]
        if len(calls) != 1:
            continue
        call = calls[0]
        assert isinstance(call.func, cst.Attribute)
        receiver = call.func.value
        if len(statement.body) == 1 and isinstance(statement.body[0], cst.Expr) and statement.body[0].value is call:
            dropped = _drop_statement(module, statement)
            if dropped is None:
                return None
            rewritten = dropped
        else:
            rewritten = replace(module, call, receiver.with_changes(lpar=[], rpar=[]) if isinstance(receiver, cst.Call) else receiver)
        return Rewrite("drop-requires-grad", f"drop .requires_grad_() on {expression_code(receiver)} (line {site.line})",
                       "requires_grad_() on a tensor made inside the compiled code asks autograd for a leaf Dynamo "
                       "cannot make", site.line, rewritten.code)
    return None


def deepcopy_to_clone(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    if not mentions(site, "deepcopy"):
        return None
    of_tensor = "tensor" in f"{site.gb_type} {site.reason}".lower()
    for statement in statements_at(module, site.line):
        for call in walk(statement):
            if not isinstance(call, cst.Call) or dotted_name(call.func) not in ("copy.deepcopy", "deepcopy"):
                continue
            if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
                continue
            value = call.args[0].value
            if not (of_tensor or plainly_tensor(value)):
                continue  # a module or a dict: clone() is no answer
            needs_parens = not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
            clone = cst.parse_expression(f"({expression_code(value)}).clone()" if needs_parens else f"{expression_code(value)}.clone()")
            rewritten = replace(module, call, clone)
            return Rewrite("deepcopy-to-clone", f"copy the tensor with .clone() instead of copy.deepcopy (line {site.line})",
                           "copy.deepcopy of a tensor cannot be traced; clone() makes the same copy inside the graph",
                           site.line, rewritten.code)
    return None


_OPERAND_SAFE = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer)


def _floor_div_operands(call: cst.Call) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    if dotted_name(call.func) != "torch.div" or len(call.args) != 3:
        return None
    first, second, mode = call.args
    if first.keyword is not None or second.keyword is not None or first.star or second.star:
        return None
    if mode.keyword is None or mode.keyword.value != "rounding_mode" or not isinstance(mode.value, cst.SimpleString) \
            or mode.value.evaluated_value != "floor":
        return None  # "trunc" differs from // on negative numbers
    if plainly_tensor(first.value) or plainly_tensor(second.value):
        return None
    return first.value, second.value


def floor_div_ints(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    if not mentions(site, "data dependent operator", "data-dependent", "div", "could not guard", "unbacked"):
        return None
    for statement in statements_at(module, site.line):
        for call in walk(statement):
            if not isinstance(call, cst.Call):
                continue
            operands = _floor_div_operands(call)
            if operands is None:
                continue
            left, right = (expression_code(o) if isinstance(o, _OPERAND_SAFE) else f"({expression_code(o)})" for o in operands)
            holder = parents(module).get(call)
            # `2 * torch.div(a, b)` is `2 * (a // b)`, not `(2 * a) // b`
            wrap = isinstance(holder, (cst.BinaryOperation, cst.UnaryOperation, cst.Attribute, cst.Subscript)) or \
                (isinstance(holder, cst.Call) and holder.func is call)
            division = cst.parse_expression(f"({left} // {right})" if wrap else f"{left} // {right}")
            rewritten = replace(module, call, division)
            return Rewrite("floor-div-ints", f"divide the sizes with // instead of torch.div (line {site.line})",
                           "torch.div on Python ints makes a tensor out of a size, so what follows is data-dependent",
                           site.line, ensure_import(rewritten, "torch").code)
    return None


def _repeats(call: cst.Call) -> list[int]:
    """The positions of ``call``'s positional arguments that repeat an earlier one (a name or attribute)."""
    seen: set[str] = set()
    repeats: list[int] = []
    for index, arg in enumerate(call.args):
        if arg.keyword is not None or arg.star:
            continue
        name = dotted_name(arg.value)
        if not name or name == "None":
            continue
        if name in seen:
            repeats.append(index)
        seen.add(name)
    return repeats


def clone_repeated_input(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    for statement in statements_at(module, site.line):
        for node in walk(statement):
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "apply"
                    and dotted_name(node.func.value)):
                continue
            repeats = _repeats(node)
            if not repeats:
                continue
            args = [arg.with_changes(value=cst.parse_expression(f"{expression_code(arg.value)}.clone()"))
                    if index in repeats else arg for index, arg in enumerate(node.args)]
            names = ", ".join(sorted({dotted_name(node.args[index].value) for index in repeats}))
            return Rewrite("clone-repeated-input",
                           f"give {dotted_name(node.func)} a clone of {names} where it repeats (line {site.line})",
                           "an autograd.Function is given one tensor twice, which Dynamo does not trace", site.line,
                           replace(module, node, node.with_changes(args=args)).code)
    return None
