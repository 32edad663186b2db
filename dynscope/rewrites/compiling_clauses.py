"""Code that does something else when compiling, and breaks for it.

``if attention_mask is None and not is_torchdynamo_compiling():`` (SwitchTransformers in
transformers 5.24) makes the default mask only in eager; compiled, the mask stays None and the
next line fails ("Observed exception": TypeError, 'NoneType' object is not subscriptable).
``drop-compiling-clause`` removes the ``not <is compiling>()`` clause from such a condition when
the line that broke reads a name the ``if`` sets, so the compiled code does what eager does.
"""

from __future__ import annotations

import libcst as cst

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.locate import (
    dotted_name,
    expression_code,
    functions_around,
    names_in,
    positions,
    replace,
    statements_at,
    walk,
)

_COMPILING = {"is_torchdynamo_compiling", "torch.compiler.is_compiling", "torch._dynamo.is_compiling", "is_compiling",
              "torch.compiler.is_dynamo_compiling", "is_dynamo_compiling"}


def _not_compiling(node: cst.BaseExpression) -> bool:
    """``not is_torchdynamo_compiling()`` and its spellings."""
    return isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not) and isinstance(node.expression, cst.Call) \
        and dotted_name(node.expression.func).removeprefix("transformers.utils.") in _COMPILING and not node.expression.args


def _without_clause(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """``a`` for ``a and not is_compiling()`` (either side); None when the test has no such clause."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        if _not_compiling(test.right):
            return test.left
        if _not_compiling(test.left):
            return test.right
    return None


def _set_names(branch: cst.If) -> set[str]:
    names: set[str] = set()
    for node in walk(branch.body):
        if isinstance(node, cst.AssignTarget):
            names |= names_in(node.target) if isinstance(node.target, cst.Name) else set()
    return names


def drop_compiling_clause(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    functions = functions_around(module, site.line)
    if not functions:
        return None
    read_at_line = set().union(*(names_in(statement) for statement in statements_at(module, site.line)))
    where = positions(module)
    for node in walk(functions[-1].body):
        if not isinstance(node, cst.If) or where[node].start.line >= site.line:
            continue
        kept = _without_clause(node.test)
        if kept is None or not (_set_names(node) & read_at_line):
            continue
        rewritten = replace(module, node.test, kept)
        names = ", ".join(sorted(_set_names(node) & read_at_line))
        return Rewrite("drop-compiling-clause", f"set {names} when compiling too: the `if` at line {where[node].start.line} keeps "
                       f"only `{expression_code(kept)}`", f"the `if` skips setting {names} when compiling, and line {site.line} "
                       "needs it", site.line, rewritten.code)
    return None
