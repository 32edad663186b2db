"""Guard failures with the value that failed them.

``torch._dynamo.guards.get_guard_fail_reason(guard_manager, code, f_locals, compile_id, ...)``
is called once per cached compile whose guards reject a frame, with the frame's locals in
hand. Torch's reason says what was expected ("n == 2", "tensor 'x' dtype mismatch. expected
Float, actual Double"); for plain value guards it does not say what came instead, so we
look that value up here, while the frame is still alive. The lookup is static: dict items
and plain attributes only, never properties or calls into user code.
"""

from __future__ import annotations

import ast
import inspect
import reprlib
import types
from collections.abc import Callable
from typing import Any

from dynscope.events import GuardFailureSeen, write
from dynscope.probes.sink import Sink

_short = reprlib.Repr()
_short.maxstring = 120
_short.maxother = 120


def patch_get_guard_fail_reason(guards_module: Any, sink: Sink) -> Callable[[], None]:
    original = guards_module.get_guard_fail_reason

    def get_guard_fail_reason(guard_manager, code, f_locals, compile_id, *args: Any, **kwargs: Any):
        reason = original(guard_manager, code, f_locals, compile_id, *args, **kwargs)
        skip_logging = kwargs.get("skip_logging", args[1] if len(args) > 1 else False)
        if not skip_logging:
            try:
                _record(guard_manager, code, f_locals, compile_id, reason, sink)
            except Exception as e:
                sink.note_error(f"guard failure probe: {type(e).__name__}: {e}")
        return reason

    get_guard_fail_reason.__wrapped__ = original  # type: ignore[attr-defined]
    guards_module.get_guard_fail_reason = get_guard_fail_reason

    def undo() -> None:
        guards_module.get_guard_fail_reason = original

    return undo


def _record(guard_manager: Any, code: types.CodeType, f_locals: dict, compile_id: Any, reason: str, sink: Sink) -> None:
    global_scope = getattr(guard_manager, "global_scope", None) or {}
    expression = guard_expression(reason)
    actual = None
    if expression is not None:
        actual = actual_value(expression, f_locals, global_scope.get("G", {}))
    write(sink, GuardFailureSeen(
        function=code.co_name,
        file=code.co_filename,
        line=code.co_firstlineno,
        failed_compile_id=str(compile_id),
        reason=reason,
        guard=expression,
        actual=actual,
    ))


def guard_expression(reason: str) -> str | None:
    """The failing guard's expression from torch's reason: '0/0: n == 2   # code  # f.py:3' -> 'n == 2'."""
    first = reason.split("\n", 1)[0]
    _, sep, rest = first.partition(": ")
    text = (rest if sep else first).split("  #", 1)[0].strip()
    return text or None


def actual_value(expression: str, f_locals: dict, globals_: dict) -> str | None:
    """repr() of the left side of a failed ``X == const`` style guard, or None."""
    try:
        tree = ast.parse(expression, mode="eval").body
    except SyntaxError:
        return None
    if isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.Not):
        tree = tree.operand
    if isinstance(tree, ast.Compare) and len(tree.comparators) == 1:
        subject = tree.left
    else:
        return None
    try:
        return _short.repr(_resolve(subject, f_locals, globals_))
    except _Unresolvable:
        return None


class _Unresolvable(Exception):
    pass


def _resolve(node: ast.expr, f_locals: dict, globals_: dict) -> Any:
    if isinstance(node, ast.Name):
        if node.id == "L":
            return f_locals
        if node.id == "G":
            return globals_
        if node.id in f_locals:
            return f_locals[node.id]
        raise _Unresolvable
    if isinstance(node, ast.Subscript):
        base = _resolve(node.value, f_locals, globals_)
        if not isinstance(base, (dict, list, tuple)):
            raise _Unresolvable
        try:
            return base[ast.literal_eval(node.slice)]
        except (ValueError, KeyError, IndexError, TypeError):
            raise _Unresolvable from None
    if isinstance(node, ast.Attribute):
        return _static_attr(_resolve(node.value, f_locals, globals_), node.attr)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1:
        value = _resolve(node.args[0], f_locals, globals_)
        if isinstance(value, (list, tuple, dict, str)):
            return len(value)
    raise _Unresolvable


def _static_attr(obj: Any, name: str) -> Any:
    try:
        value = inspect.getattr_static(obj, name)
    except AttributeError:
        raise _Unresolvable from None
    if isinstance(value, (property, types.FunctionType, types.MethodType, staticmethod, classmethod)) or hasattr(
        type(value), "__get__"
    ):
        raise _Unresolvable  # a descriptor: reading it would run code
    return value
