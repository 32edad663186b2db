"""A Python branch on a tensor's value: ``if x.sum() > 0:``, ``if mask.any():``, ``a if t.max() > 0 else b``.

Dynamo cannot know which arm runs without the value, so it stops the graph at the jump
("Data-dependent branching"). Two answers, both keeping the branch inside the graph:

- ``tensor-where``: compute both arms and pick element-wise with ``torch.where(cond, a, b)``,
  when each arm is one expression given to the same name (or returned): the arms must be
  cheap and safe to run both, which the trial's equal outputs prove.
- ``tensor-cond``: ``torch.cond(cond, then_fn, else_fn, ())`` with the arms as local functions,
  when the arms are a few plain assignments ending in the same name (or a return); only the
  taken arm runs, but both must give tensors of one shape.

- ``item-where``: by shape, whatever torch's label: the same ``torch.where`` for a branch whose
  condition reads a number out of a tensor (``if y.sum().item() > 0: return a`` / ``return b``),
  the read dropped so the condition stays a tensor. It assumes both arms are tensors of one shape
  (its cause says so; the trial's equal outputs prove it); arms that are both bare numbers decline.

Declined: ``and`` / ``or`` conditions (Python short-circuits on a Python value first),
``elif`` chains, arms with comments or statements other than plain assignments.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.locate import (
    block_holding,
    comment_lines,
    expression_code,
    has_comment,
    ifs_at,
    mentions,
    names_in,
    parents,
    positions,
    replace,
    replace_run,
    walk,
)
from dynscope.rewrites.locate import ensure_import as _ensure_import
from dynscope.rewrites.scalar_sizes import assignments_at, without_scalar_reads

_BREAK_WORDS = ("data-dependent branching", "generic_jump", "jump")
_CAUSE = "Python branches on a tensor's value, which Dynamo cannot know while tracing"


def _predicate(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """The branch condition as a tensor expression; None when it mixes in Python logic."""
    if isinstance(test, cst.BooleanOperation):
        return None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _predicate(test.expression)
        return None if inner is None else _call("torch.logical_not", inner)
    return test.with_changes(lpar=[], rpar=[]) if isinstance(test, cst.Comparison) else test


def _call(function: str, *args: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=cst.parse_expression(function),
                    args=[cst.Arg(arg, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if index < len(args) - 1
                                  else cst.MaybeSentinel.DEFAULT) for index, arg in enumerate(args)])


def _single(block: cst.BaseSuite) -> cst.BaseSmallStatement | None:
    """The one small statement of an arm (``y = a`` / ``return a``), or None."""
    statements: Sequence[cst.BaseSmallStatement]
    if isinstance(block, cst.IndentedBlock):
        if len(block.body) != 1 or not isinstance(block.body[0], cst.SimpleStatementLine):
            return None
        statements = block.body[0].body
    elif isinstance(block, cst.SimpleStatementSuite):
        statements = block.body
    else:
        return None
    return statements[0] if len(statements) == 1 else None


def _assigned_name(statement: cst.BaseSmallStatement | None) -> tuple[str, cst.BaseExpression] | None:
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0].target, cst.Name):
        return statement.targets[0].target.value, statement.value
    return None


def _augmented(statement: cst.BaseSmallStatement | None) -> tuple[str, cst.BaseExpression] | None:
    """``y += a`` as (``y``, ``y + a``)."""
    if not isinstance(statement, cst.AugAssign) or not isinstance(statement.target, cst.Name):
        return None
    operator_code = cst.Module(body=[]).code_for_node(statement.operator).strip().rstrip("=")
    name = statement.target.value
    operand = expression_code(statement.value)
    # `y -= a + b` is `y - (a + b)`: parentheses unless the operand is atomic
    if not isinstance(statement.value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)):
        operand = f"({operand})"
    return name, cst.parse_expression(f"{name} {operator_code} {operand}")


def _returned(statement: cst.BaseSmallStatement | None) -> cst.BaseExpression | None:
    if isinstance(statement, cst.Return) and statement.value is not None:
        return statement.value
    return None


def _statement_line(small: cst.BaseSmallStatement, branch: cst.If, *also: cst.CSTNode) -> cst.SimpleStatementLine:
    """One statement standing for the whole ``if``: its leading lines, and the comments of its arms above it."""
    comments = comment_lines(branch.test, branch.body, branch.orelse, *also)
    return cst.SimpleStatementLine(body=[small], leading_lines=[*branch.leading_lines, *comments])


def _where_for_if(module: cst.Module, branch: cst.If, test: cst.BaseExpression | None = None
                  ) -> tuple[int, cst.SimpleStatementLine] | None:
    """(how many statements from the ``if`` on to replace, the statement replacing them) for an ``if``
    whose arms give one expression each; ``test`` stands for the ``if``'s condition when given."""
    predicate = _predicate(branch.test if test is None else test)
    if predicate is None or isinstance(branch.orelse, cst.If):
        return None
    then = _single(branch.body)
    otherwise = _single(branch.orelse.body) if isinstance(branch.orelse, cst.Else) else None
    if branch.orelse is not None and otherwise is None:
        return None
    then_assign = _assigned_name(then) or (_augmented(then) if branch.orelse is None else None)
    if then_assign is not None:
        name, value = then_assign
        if otherwise is None:
            fallback: cst.BaseExpression = cst.Name(name)
        else:
            other_assign = _assigned_name(otherwise) or _augmented(otherwise)
            if other_assign is None or other_assign[0] != name:
                return None
            fallback = other_assign[1]
        if _slices(value) or _slices(fallback):
            return None
        assign = cst.Assign(targets=[cst.AssignTarget(cst.Name(name))], value=_call("torch.where", predicate, value, fallback))
        return 1, _statement_line(assign, branch)
    then_value = _returned(then)
    if then_value is None:
        return None
    if otherwise is not None:
        else_value = _returned(otherwise)
        if else_value is None:
            return None
        if _slices(then_value) or _slices(else_value):
            return None
        return 1, _statement_line(cst.Return(_call("torch.where", predicate, then_value, else_value)), branch)
    # early return: `if c: return a` then `return b` as the next statement
    block = block_holding(module, branch)
    if block is None:
        return None
    index = block.index(branch)
    following = block[index + 1] if index + 1 < len(block) else None
    if not isinstance(following, cst.SimpleStatementLine) or len(following.body) != 1:
        return None
    else_value = _returned(following.body[0])
    if else_value is None or _slices(then_value) or _slices(else_value):
        return None
    return 2, _statement_line(cst.Return(_call("torch.where", predicate, then_value, else_value)), branch, following)


def _ifexp_at(module: cst.Module, line: int) -> list[cst.IfExp]:
    where = positions(module)
    return [node for node in where if isinstance(node, cst.IfExp) and where[node.test].start.line <= line <= where[node.test].end.line]


def _on_numpy(site: BreakSite) -> bool:
    """torch says the value branched on is a NumPy one (Reformer's np.lcm): not a tensor to pick with."""
    return "numpy" in f"{site.gb_type} {site.reason}".lower()


def _slices(expression: cst.BaseExpression) -> bool:
    """An arm that slices (``x[:, :n]``) gives another shape than the value it would replace."""
    return any(isinstance(node, cst.Slice) for node in walk(expression))


def tensor_where(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    if not mentions(site, *_BREAK_WORDS) or _on_numpy(site):
        return None
    for branch in reversed(ifs_at(module, site.line)):
        change = _where_for_if(module, branch)
        if change is None:
            continue
        count, new = change
        rewritten = replace_run(module, branch, count, [new])
        return _rewrite("tensor-where", f"pick with torch.where instead of branching on a tensor (line {site.line})", site, rewritten)
    for conditional in reversed(_ifexp_at(module, site.line)):
        predicate = _predicate(conditional.test)
        if predicate is None or has_comment(conditional) or _slices(conditional.body) or _slices(conditional.orelse):
            continue
        where_call = _call("torch.where", predicate, conditional.body, conditional.orelse)
        return _rewrite("tensor-where", f"pick with torch.where instead of a conditional expression on a tensor (line {site.line})",
                        site, replace(module, conditional, where_call))
    return None


def _arm_function(name: str, block: cst.BaseSuite, target: str | None) -> cst.FunctionDef | None:
    """An arm as a local function that returns its result: plain assignments, then the target's
    assignment (or a return) last; None when the arm is anything else."""
    if not isinstance(block, cst.IndentedBlock) or has_comment(block) or not block.body:
        return None
    smalls: list[cst.BaseSmallStatement] = []
    for statement in block.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        smalls.extend(statement.body)
    *steps, last = smalls
    assigned: set[str] = set()
    for step in steps:
        named = _assigned_name(step)
        if named is None or named[0] == target or names_in(named[1]) & (_all_assigned(smalls) - assigned):
            return None  # read before it is set: in a function it would be an unbound local
        assigned.add(named[0])
    final = _assigned_name(last)
    if target is not None:
        if final is None or final[0] != target or names_in(final[1]) & ({target} | (_all_assigned(smalls) - assigned)):
            return None
        result = final[1]
    else:
        returned = _returned(last)
        if returned is None:
            return None
        result = returned
    body = [cst.SimpleStatementLine(body=[step]) for step in steps] + [cst.SimpleStatementLine(body=[cst.Return(result)])]
    return cst.FunctionDef(name=cst.Name(name), params=cst.Parameters(), body=cst.IndentedBlock(body=body))


def _all_assigned(smalls: list[cst.BaseSmallStatement]) -> set[str]:
    return {named[0] for named in map(_assigned_name, smalls) if named is not None}


def _target_of(block: cst.BaseSuite) -> str | None:
    if not isinstance(block, cst.IndentedBlock) or not block.body:
        return None
    last = block.body[-1]
    if isinstance(last, cst.SimpleStatementLine):
        named = _assigned_name(last.body[-1])
        return named[0] if named is not None else None
    return None


def tensor_cond(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    if not mentions(site, *_BREAK_WORDS) or _on_numpy(site):
        return None
    for branch in reversed(ifs_at(module, site.line)):
        if _where_for_if(module, branch) is not None:
            return None  # torch.where answers it
        if not isinstance(branch.orelse, cst.Else):
            continue
        predicate = _predicate(branch.test)
        if predicate is None:
            continue
        target = _target_of(branch.body)
        suffix = str(site.line)
        then_fn = _arm_function(f"_then_{suffix}", branch.body, target)
        else_fn = _arm_function(f"_else_{suffix}", branch.orelse.body, target)
        if then_fn is None or else_fn is None:
            continue
        if target is not None and _locals_used_after(module, branch, then_fn, else_fn):
            continue
        cond = _call("torch.cond", predicate, cst.Name(then_fn.name.value), cst.Name(else_fn.name.value), cst.Tuple(elements=[]))
        small: cst.BaseSmallStatement = cst.Return(cond) if target is None else \
            cst.Assign(targets=[cst.AssignTarget(cst.Name(target))], value=cond)
        new: list[cst.BaseStatement] = [then_fn.with_changes(leading_lines=branch.leading_lines), else_fn,
                                        cst.SimpleStatementLine(body=[small])]
        return _rewrite("tensor-cond", f"run the branch as torch.cond with the arms as local functions (line {site.line})",
                        site, replace_run(module, branch, 1, new))
    return None


def _locals_used_after(module: cst.Module, branch: cst.If, *arms: cst.FunctionDef) -> bool:
    """Whether a name an arm sets (besides the target) is read after the ``if``: inside a local
    function it would no longer be set there."""
    block = block_holding(module, branch)
    if block is None:
        return True
    inner: set[str] = set()
    for arm in arms:
        for statement in arm.body.body:
            if isinstance(statement, cst.SimpleStatementLine):
                named = _assigned_name(statement.body[0])
                if named is not None:
                    inner.add(named[0])
    later = block[block.index(branch) + 1:]
    return any(names_in(statement) & inner for statement in later)


def _rewrite(rule: str, title: str, site: BreakSite, module: cst.Module) -> Rewrite:
    return Rewrite(rule, title, _CAUSE, site.line, _ensure_import(module, "torch").code)


_ITEM_CAUSE = ("the branch reads a number out of a tensor (.item(), int(t)) to choose, which ends the graph; "
               "torch.where computes both arms and picks, assuming both are tensors of one shape")


def _numbers_only(*arms: cst.BaseExpression) -> bool:
    """Both arms bare numbers: the original gives a Python number, torch.where a tensor."""
    return all(isinstance(arm, (cst.Integer, cst.Float)) or (isinstance(arm, cst.UnaryOperation) and
               isinstance(arm.expression, (cst.Integer, cst.Float))) for arm in arms)


def _tensor_condition(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """``test`` with its reads of numbers out of tensors dropped; None when it reads none, or keeps Python
    logic inside (``a < t < b``, ``and``) that would ask for a bool again."""
    kept = without_scalar_reads(test)
    if kept is None or any(isinstance(node, cst.BooleanOperation) or (isinstance(node, cst.Comparison) and
                                                                      len(node.comparisons) > 1) for node in walk(kept)):
        return None
    return kept


def _branch_on(module: cst.Module, use: cst.Name) -> cst.If | None:
    """The ``if`` whose condition is ``use`` or a comparison holding it."""
    holders = parents(module)
    holder = holders.get(use)
    if isinstance(holder, cst.If) and holder.test is use:
        return holder
    above = holders.get(holder) if isinstance(holder, cst.Comparison) else None
    return above if isinstance(above, cst.If) and above.test is holder else None


def _picked(statement: cst.SimpleStatementLine) -> list[cst.BaseExpression]:
    """The two arms of the ``torch.where`` call that ``statement`` assigns or returns."""
    small = statement.body[0]
    call = small.value if isinstance(small, (cst.Assign, cst.Return)) else None
    return [arg.value for arg in call.args[1:3]] if isinstance(call, cst.Call) else []


def _read_flowing_into_branch(module: cst.Module, site: BreakSite) -> Rewrite | None:
    """``s = y.sum().item()`` at the break, read once after it, by the condition of an ``if`` that ``torch.where``
    answers: ``s`` kept a tensor (the read dropped) and the ``if`` made one ``torch.where``."""
    for assigned in assignments_at(module, site):
        statement, small, name = assigned.statement, assigned.small, assigned.name
        kept = _tensor_condition(small.value)
        if kept is None:
            continue
        uses = assigned.uses_after(module)
        branch = _branch_on(module, uses[0]) if len(uses) == 1 else None
        block = block_holding(module, statement)
        if branch is None or block is None or branch not in block:
            continue
        change = _where_for_if(module, branch)
        if change is None or _numbers_only(*_picked(change[1])):
            continue
        between = list(block[block.index(statement) + 1:block.index(branch)])
        count, new = change
        kept_line = statement.with_changes(body=[small.with_changes(value=kept)])
        rewritten = replace_run(module, statement, len(between) + 1 + count, [kept_line, *between, new])
        return Rewrite("item-where", f"keep {name} a tensor and pick with torch.where where it is branched on (line "
                       f"{site.line}; both arms must be tensors of one shape)", _ITEM_CAUSE, site.line,
                       _ensure_import(rewritten, "torch").code)
    return None


def item_where(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    flowing = _read_flowing_into_branch(module, site)
    if flowing is not None:
        return flowing
    for branch in reversed(ifs_at(module, site.line)):
        kept = _tensor_condition(branch.test)
        if kept is None:
            continue
        change = _where_for_if(module, branch, kept)
        if change is None:
            continue
        count, new = change
        if _numbers_only(*_picked(new)):
            continue
        rewritten = replace_run(module, branch, count, [new])
        return Rewrite("item-where", f"pick with torch.where on the tensor instead of branching on a number read out of it "
                       f"(line {site.line}; both arms must be tensors of one shape)", _ITEM_CAUSE, site.line,
                       _ensure_import(rewritten, "torch").code)
    for conditional in reversed(_ifexp_at(module, site.line)):
        kept = _tensor_condition(conditional.test)
        predicate = _predicate(kept) if kept is not None else None
        if predicate is None or has_comment(conditional) or _slices(conditional.body) or _slices(conditional.orelse) \
                or _numbers_only(conditional.body, conditional.orelse):
            continue
        where_call = _call("torch.where", predicate, conditional.body, conditional.orelse)
        return Rewrite("item-where", f"pick with torch.where on the tensor instead of a conditional expression on a number "
                       f"read out of it (line {site.line}; both arms must be tensors of one shape)", _ITEM_CAUSE, site.line,
                       _ensure_import(replace(module, conditional, where_call), "torch").code)
    return None
