"""``print`` / ``logging.*`` / ``warnings.warn`` in compiled code: run it only when not compiling.

Dynamo breaks the graph at a call it must not trace because it writes outside the program
(a print, a log record, a warning). Under ``if not torch.compiler.is_compiling():`` the
call still runs in eager and Dynamo drops it while tracing, so the graph stays whole; the
compiled program no longer prints, which is what the trial's verdict and the diff show.
"""

from __future__ import annotations

import libcst as cst

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.locate import statements_at

_CALLS = {"print", "logging.debug", "logging.info", "logging.warning", "logging.error", "logging.critical",
          "logging.log", "warnings.warn", "logger.debug", "logger.info", "logger.warning", "log.info", "log.debug"}


def _name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_name(node.value)}.{node.attr.value}"
    return ""


def _logging_call(statement: cst.SimpleStatementLine) -> str | None:
    if len(statement.body) != 1 or not isinstance(statement.body[0], cst.Expr):
        return None
    call = statement.body[0].value
    if isinstance(call, cst.Call) and _name(call.func) in _CALLS:
        return _name(call.func)
    return None


class _Guard(cst.CSTTransformer):
    def __init__(self, target: cst.SimpleStatementLine) -> None:
        self.target = target

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
                                  ) -> cst.BaseStatement:
        if original is not self.target:
            return updated
        return cst.If(
            test=cst.parse_expression("not torch.compiler.is_compiling()"),
            body=cst.IndentedBlock(body=[updated.with_changes(leading_lines=[])]),
            leading_lines=updated.leading_lines,
        )


def guard_logging(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    for statement in statements_at(module, site.line):
        called = _logging_call(statement)
        if called is None:
            continue
        rewritten = module.visit(_Guard(statement))
        # TODO(catalogue): add `import torch` when the module lacks it
        return Rewrite("guard-logging", f"run {called}(...) only when not compiling (line {site.line})",
                       f"{called}(...) writes outside the program, so Dynamo stops the graph there", site.line,
                       rewritten.code)
    return None
