"""Check a generated repro.py before it is written, run or shown (no torch here).

repro.py is made from a recorded graph, so it is checked as a stranger's program would be:
parsed with ``ast`` and accepted only when every statement is one the generator writes and
every name it calls comes from minifier/graph_ops.py's table. What is accepted:

  * the docstring; ``import torch``; ``import`` of a config module that
    minifier/replay_settings.py lists; ``from pathlib import Path``; torch.fx's own globals
    (``from torch import device``, ``from math import inf`` ...); ``from M import N as A``
    where M.N is in the table (torch.fx's aliases for math functions);
  * ``<config module>.<setting> = <literal>`` for a setting and value replay_settings allows;
  * the helpers copied from minifier/standalone.py, exactly as they are there;
  * ``class Repro(torch.nn.Module)`` with one ``forward``, and ``make_inputs`` and ``main``,
    built from assignments, calls, arithmetic, subscripts, ``with`` and ``if``: names are
    their own locals and parameters, the module's names and a few builtins; a ``torch.``
    path is a table function, an aten/prims overload, a dtype, or the scaffolding's
    (torch.compile with allowed options, torch.load with weights_only=True of
    repro_inputs.pt, ...); a method is a Tensor method of the table;
  * ``if __name__ == "__main__": main()``.
"""

from __future__ import annotations

import ast
import os
from typing import Any

from dynscope.minifier import graph_ops, replay_settings

_HELPERS = ("tensors_in", "accuracy_problem", "to_float64", "run_with_grads", "clone_inputs", "rand_strided")
_GENERATED_FUNCTIONS = ("make_inputs", "main")
_FX_IMPORTS = {"from torch import device", "from math import inf", "from math import nan",
               "import torch.fx._pytree as fx_pytree", "import torch.utils._pytree as pytree"}
# torch paths the scaffolding uses (the graph's own come from the table).
_SCAFFOLDING_TORCH = frozenset({"torch.Generator", "torch.manual_seed", "torch.compile", "torch.set_grad_enabled",
                                "torch.load", "torch.nn.Module", "torch.cuda.synchronize"})
_SCAFFOLDING_METHODS = frozenset({"manual_seed", "with_name"})  # torch.Generator(), Path(__file__)
_BUILTINS = frozenset({"print", "AssertionError", "slice", "Ellipsis", "__file__"}) | graph_ops.BUILTIN_FUNCTIONS
_NODES = (ast.Expr, ast.Assign, ast.AugAssign, ast.Return, ast.Raise, ast.If, ast.With, ast.withitem, ast.Call, ast.keyword,
          ast.Attribute, ast.Name, ast.Constant, ast.Tuple, ast.List, ast.Dict, ast.Subscript, ast.Slice, ast.BinOp,
          ast.UnaryOp, ast.Compare, ast.BoolOp, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


class ReproRefused(Exception):
    pass


def problem(source: str, values_file: str) -> str | None:
    """Why ``source`` is not a repro.py the generator writes (None: it is)."""
    try:
        _check_module(ast.parse(source), values_file)
    except SyntaxError as e:
        return f"it does not parse ({e.msg})"
    except (ReproRefused, RecursionError) as e:
        return str(e) or "it nests too deeply"
    return None


def _check_module(tree: ast.Module, values_file: str) -> None:
    helpers = _standalone_helpers()
    names = {"torch", "NoneType", "Path", "device", "inf", "nan", *helpers, *_GENERATED_FUNCTIONS, "Repro"}
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    for statement in body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            names.update(_checked_import(statement))
        elif isinstance(statement, ast.Assign):
            _check_top_assignment(statement)
        elif isinstance(statement, ast.FunctionDef) and statement.name in helpers:
            if ast.dump(statement) != ast.dump(helpers[statement.name]):
                raise ReproRefused(f"its helper {statement.name} differs from dynscope's")
        elif isinstance(statement, ast.FunctionDef) and statement.name in _GENERATED_FUNCTIONS:
            _Body(names, values_file).function(statement)
        elif isinstance(statement, ast.ClassDef) and statement.name == "Repro":
            _check_class(statement, names, values_file)
        elif isinstance(statement, ast.If) and ast.dump(statement) == _MAIN_GUARD:
            continue
        else:
            raise ReproRefused(f"line {statement.lineno} is not a statement dynscope writes")


_MAIN_GUARD = ast.dump(ast.parse('if __name__ == "__main__":\n    main()').body[0])


def _checked_import(statement: ast.Import | ast.ImportFrom) -> set[str]:
    text = ast.unparse(statement)
    if text in _FX_IMPORTS or text in ("import torch", "from pathlib import Path"):
        return set()
    if isinstance(statement, ast.Import) and len(statement.names) == 1 and statement.names[0].asname is None \
            and statement.names[0].name in replay_settings.REPLAYED:
        return set()
    if isinstance(statement, ast.ImportFrom) and statement.level == 0 and len(statement.names) == 1:
        alias = statement.names[0]
        if graph_ops.target_refusal(f"{statement.module}.{alias.name}") is None and alias.asname \
                and graph_ops.plain_name(alias.asname):
            return {alias.asname}
    raise ReproRefused(f"line {statement.lineno} imports something dynscope does not write ({text[:80]})")


def _check_top_assignment(statement: ast.Assign) -> None:
    text = ast.unparse(statement)
    if text == "NoneType = type(None)":
        return
    target = _dotted(statement.targets[0]) if len(statement.targets) == 1 else None
    module, _, key = (target or "").partition(".config.")
    ok, value = _literal(statement.value)
    if not ok or not key or not replay_settings.allowed(f"{module}.config", key, value):
        raise ReproRefused(f"line {statement.lineno} sets something other than an allowed torch setting "
                           f"({text[:80]})")


def _check_class(statement: ast.ClassDef, names: set[str], values_file: str) -> None:
    if statement.decorator_list or statement.keywords or [ast.unparse(b) for b in statement.bases] != ["torch.nn.Module"] \
            or len(statement.body) != 1 or not isinstance(statement.body[0], ast.FunctionDef) \
            or statement.body[0].name != "forward":
        raise ReproRefused("its Repro class is not the module dynscope writes")
    _Body(names, values_file).function(statement.body[0], method=True)


class _Body:
    """One generated function: its statements, names, calls and attributes."""

    def __init__(self, module_names: set[str], values_file: str) -> None:
        self.module_names = module_names
        self.values_file = values_file
        self.local: set[str] = set()

    def function(self, fn: ast.FunctionDef, *, method: bool = False) -> None:
        args = fn.args
        if fn.decorator_list or fn.returns or args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs \
                or args.defaults or args.kw_defaults or any(a.annotation for a in args.args):
            raise ReproRefused(f"its function {fn.name} has defaults, annotations or decorators")
        params = [a.arg for a in args.args]
        if method:
            if not params or params[0] != "self":
                raise ReproRefused("its forward does not take self first")
            params = params[1:]
        elif params:
            raise ReproRefused(f"its function {fn.name} takes arguments")
        for name in params:
            self._store(name, fn.lineno)
        # Locals first (a use may come before the assignment only in error, never as code to run).
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self._store(node.id, node.lineno)
        for statement in fn.body:
            self._visit(statement)

    def _store(self, name: str, line: int) -> None:
        if not graph_ops.plain_name(name):
            raise ReproRefused(f"line {line} binds a name that is not plain ({name[:40]!r})")
        self.local.add(name)

    def _visit(self, node: ast.AST) -> None:
        if not isinstance(node, _NODES):
            raise ReproRefused(f"line {getattr(node, 'lineno', '?')} holds a {type(node).__name__}, "
                               "which dynscope does not write")
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id not in self.local | self.module_names | _BUILTINS:
                raise ReproRefused(f"line {node.lineno} uses {node.id[:40]!r}, which is not defined")
            return
        if isinstance(node, ast.Attribute):
            self._attribute(node)
            return
        if isinstance(node, ast.Call):
            self._call(node)
            return
        if isinstance(node, ast.keyword) and (node.arg is None or not node.arg.isidentifier()):
            raise ReproRefused(f"line {node.lineno} passes keyword arguments by unpacking")
        for child in ast.iter_child_nodes(node):
            self._visit(child)

    def _attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node)
        if dotted is not None and dotted.split(".")[0] == "torch":
            if not _torch_path_allowed(dotted):
                raise ReproRefused(f"line {node.lineno} uses {dotted[:80]}, which is not in dynscope's table")
            return
        if node.attr not in graph_ops.TENSOR_METHODS and node.attr not in _SCAFFOLDING_METHODS:
            raise ReproRefused(f"line {node.lineno} uses the attribute {node.attr[:40]!r}, which is not a "
                               "tensor method of dynscope's table")
        self._visit(node.value)

    def _call(self, node: ast.Call) -> None:
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise ReproRefused(f"line {node.lineno} unpacks arguments")
        callee = _dotted(node.func)
        if callee == "torch.load":
            self._check_load(node)
        elif callee == "torch.compile":
            self._check_compile(node)
        for child in ast.iter_child_nodes(node):
            self._visit(child)

    def _check_load(self, node: ast.Call) -> None:
        expected = f'torch.load(Path(__file__).with_name({self.values_file!r}), weights_only=True)'
        if ast.dump(node) != ast.dump(ast.parse(expected, mode="eval").body):
            raise ReproRefused(f"line {node.lineno} loads something other than {self.values_file}")

    def _check_compile(self, node: ast.Call) -> None:
        for keyword in node.keywords:
            ok, value = _literal(keyword.value)
            if not ok:
                raise ReproRefused(f"line {node.lineno}: torch.compile's {keyword.arg} is not a literal")
            if keyword.arg == "options":
                kept, dropped = replay_settings.backend_options(value)
                ok = not dropped and isinstance(value, dict)
            elif keyword.arg == "backend":
                ok = replay_settings.checked_backend({"name": value})[0]["name"] == value
            elif keyword.arg == "mode":
                ok = replay_settings.checked_backend({"name": "inductor", "mode": value})[0]["name"] == "inductor"
            else:
                ok = False
            if not ok:
                raise ReproRefused(f"line {node.lineno}: torch.compile's {keyword.arg} is not one dynscope writes")


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _torch_path_allowed(dotted: str) -> bool:
    name = dotted.removeprefix("torch.")
    return (dotted in graph_ops.TORCH_FUNCTIONS or dotted in _SCAFFOLDING_TORCH
            or graph_ops.target_refusal(dotted) is None and graph_ops.op_target(dotted) is not None
            or name in graph_ops.DTYPES or name in graph_ops.LAYOUTS or name in graph_ops.MEMORY_FORMATS)


def _dotted(node: ast.AST) -> str | None:
    """"a.b.c" for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _standalone_helpers() -> dict[str, Any]:
    """The helper functions of minifier/standalone.py, parsed (repro.py copies them verbatim)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standalone.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in _HELPERS}
