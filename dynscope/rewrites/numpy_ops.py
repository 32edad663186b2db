"""``numpy-helper-op``: a NumPy helper whose result the caller makes a tensor becomes one custom op in the graph.

A host-side helper (NumPy arrays built or drawn from ``np.random``: SpecAugment's ``_compute_mask_indices``)
cannot be traced, and hatching its caller whole (``leaf-method``) runs all of the caller as Python at every call,
the paths that need no NumPy too. This hatch is the smallest opaque piece instead: the helper and the conversion
of its result (``torch.tensor(helper(...))``, ``torch.as_tensor``, ``torch.from_numpy``, in the call or on the
next line) become ``torch.library.custom_op``, public API. Its fake makes one real call of the helper on the same
Python numbers with NumPy's random state put back after it (the draws of the compiled run stay eager's), and
gives the compiler an empty tensor of that shape and dtype. Written at the caller's line (``BreakSite.caller``),
for every call of the helper in the file that has the shape; the helper itself is left as it is.

Declined: a helper not defined at the top of this file, one with ``*args`` or keyword-only parameters, a
parameter whose type the op's schema cannot carry (numbers, strings, lists of numbers, tensors, each maybe
``None``; an unannotated one only with a number for default), a conversion with keywords other than
``device``/``dtype``, an array read again after its conversion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst

from dynscope.rewrites import BreakSite, Offers, Rewrite
from dynscope.rewrites.locate import (
    binds_at_top,
    block_holding,
    dotted_name,
    ensure_import,
    expression_code,
    names_in,
    parents,
    positions,
    replace_each,
    replace_run,
    walk,
)
from dynscope.rewrites.numpy_calls import is_numpy_helper, numpy_names

_CONVERSIONS = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy"})
_KEPT_KEYWORDS = ("device", "dtype")  # moved to ``.to(...)`` on the op's result
_NUMBERS = frozenset({"int", "float", "bool", "str"})
_SEQUENCES = frozenset({"tuple", "Tuple", "list", "List", "Sequence"})


@dataclass(frozen=True)
class _Param:
    """One parameter of the helper, as the op declares it and hands it on."""

    name: str
    schema: str  # the op's annotation: "int", "list[int]", "torch.Tensor | None", ...
    default: str | None  # as written in the helper
    passed: str  # the op's argument turned back into what the helper took ("tuple(shape)")
    concrete: str  # what the fake hands the helper: a Python value where the compiler passes a symbolic size


def _optional(annotation: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """``X`` and whether it may be None, for ``X | None``, ``None | X``, ``Optional[X]``, ``X``."""
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        for inner, other in ((annotation.left, annotation.right), (annotation.right, annotation.left)):
            if isinstance(other, cst.Name) and other.value == "None":
                return inner, True
    if isinstance(annotation, cst.Subscript) and dotted_name(annotation.value).rpartition(".")[2] == "Optional" \
            and len(annotation.slice) == 1 and isinstance(annotation.slice[0].slice, cst.Index):
        return annotation.slice[0].slice.value, True
    return annotation, False


def _element(annotation: cst.Subscript) -> str | None:
    """``int`` for ``tuple[int, int]``, ``tuple[int, ...]``, ``list[int]``, ``Sequence[int]``: one number type."""
    kinds = {dotted_name(element.slice.value) for element in annotation.slice
             if isinstance(element.slice, cst.Index) and not isinstance(element.slice.value, cst.Ellipsis)}
    return next(iter(kinds)) if len(kinds) == 1 and next(iter(kinds)) in ("int", "float", "bool") else None


def _kind(param: cst.Param) -> tuple[str, str, str] | None:
    """(the op's type, how the op passes it on, how the fake makes it concrete), with ``{}`` for the name."""
    if param.annotation is None:
        default = param.default
        kind = "int" if isinstance(default, cst.Integer) else "float" if isinstance(default, cst.Float) else \
            "bool" if isinstance(default, cst.Name) and default.value in ("True", "False") else None
        return (kind, "{}", f"{kind}({{}})") if kind else None
    inner, optional = _optional(param.annotation.annotation)
    name = dotted_name(inner)
    if name in _NUMBERS:
        found = (name, "{}", f"{name}({{}})" if name != "str" else "{}")
    elif name.rpartition(".")[2].endswith("Tensor"):
        found = ("torch.Tensor", "{}", "{}")
    elif isinstance(inner, cst.Subscript) and dotted_name(inner.value).rpartition(".")[2] in _SEQUENCES \
            and (element := _element(inner)) is not None:
        again = "tuple" if dotted_name(inner.value).rpartition(".")[2] in ("tuple", "Tuple") else "list"
        found = (f"list[{element}]", f"{again}({{}})", f"{again}({element}(v) for v in {{}})")
    else:
        return None
    if not optional:
        return found
    schema, passed, concrete = found
    return (f"{schema} | None", _or_none(passed), _or_none(concrete))


def _or_none(code: str) -> str:
    return code if code == "{}" else f"None if {{0}} is None else {code.replace('{}', '{0}')}"


def _params(helper: cst.FunctionDef) -> list[_Param] | None:
    params = helper.params
    if isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None or params.kwonly_params:
        return None
    found: list[_Param] = []
    for param in [*params.posonly_params, *params.params]:
        kind = _kind(param)
        default = None if param.default is None else expression_code(param.default)
        if kind is None or (default is not None and not _plain_default(param.default)):
            return None
        name = param.name.value
        found.append(_Param(name, kind[0], default, kind[1].format(name), kind[2].format(name)))
    return found


def _plain_default(default: cst.BaseExpression | None) -> bool:
    """A default the op's schema takes: a number, a string, a boolean, None."""
    if isinstance(default, cst.UnaryOperation) and isinstance(default.operator, cst.Minus):
        default = default.expression
    return isinstance(default, (cst.Integer, cst.Float, cst.SimpleString)) or (
        isinstance(default, cst.Name) and default.value in ("True", "False", "None"))


@dataclass(frozen=True)
class _Conversion:
    """A call of the helper and the conversion of its result to a tensor."""

    call: cst.Call  # helper(...)
    converted: cst.Call  # torch.tensor(helper(...)) or torch.tensor(name) on the next line
    keywords: tuple[cst.Arg, ...]  # device=..., dtype=...


def _converting(node: cst.CSTNode | None, first: cst.BaseExpression | None = None) -> tuple[cst.Arg, ...] | None:
    """The ``device``/``dtype`` keywords when ``node`` is ``torch.tensor(x, ...)`` (or ``as_tensor``,
    ``from_numpy``) with ``first`` (when given) as ``x``; None when it is not one."""
    if not isinstance(node, cst.Call) or dotted_name(node.func) not in _CONVERSIONS or not node.args:
        return None
    head, *rest = node.args
    if head.keyword is not None or head.star or (first is not None and head.value is not first):
        return None
    if any(arg.keyword is None or arg.keyword.value not in _KEPT_KEYWORDS for arg in rest):
        return None
    return tuple(rest)


def _conversions(module: cst.Module, helper: str) -> list[_Conversion]:
    """Every call of ``helper`` whose result is made a tensor: inside the conversion, or assigned to a name the
    next statement converts (``m = helper(...)`` then ``m = torch.tensor(m, dtype=torch.bool)``)."""
    up = parents(module)
    found: list[_Conversion] = []
    for call in walk(module):
        if not isinstance(call, cst.Call) or dotted_name(call.func) != helper or any(a.star for a in call.args):
            continue
        arg = up.get(call)
        holder = up.get(arg) if isinstance(arg, cst.Arg) else None  # the call it is an argument of
        keywords = _converting(holder, call)
        if isinstance(holder, cst.Call) and keywords is not None:
            found.append(_Conversion(call, holder, keywords))
            continue
        later = _converted_next(module, up, call)
        if later is not None:
            found.append(_Conversion(call, *later))
    return found


def _converted_next(module: cst.Module, up: Mapping[cst.CSTNode, cst.CSTNode], call: cst.Call
                    ) -> tuple[cst.Call, tuple[cst.Arg, ...]] | None:
    """``torch.tensor(m, ...)`` on the statement after ``m = helper(...)``, where nothing else reads the array:
    the conversion reads ``m`` once and either assigns ``m`` or is the last statement of its block to read it."""
    assign = up.get(call)
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None
    line, name = up.get(assign), assign.targets[0].target.value
    block = block_holding(module, line) if isinstance(line, cst.SimpleStatementLine) else None
    if block is None or line is None or block.index(line) + 1 >= len(block):
        return None
    index = block.index(line) + 1
    following = block[index]
    reads = [node for node in walk(following) if isinstance(node, cst.Name) and node.value == name]
    for node in walk(following):
        keywords = _converting(node)
        if keywords is None or not isinstance(node, cst.Call) or not isinstance(node.args[0].value, cst.Name) \
                or node.args[0].value.value != name or len(reads) != 1 + _assigns(following, name):
            continue
        if _assigns(following, name) or not any(name in names_in(later) for later in block[index + 1:]):
            return node, keywords
    return None


def _assigns(statement: cst.BaseStatement, name: str) -> int:
    """1 when ``statement`` is ``name = ...``, else 0."""
    body = statement.body if isinstance(statement, cst.SimpleStatementLine) else ()
    return int(any(isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                         for t in small.targets) for small in body))


def _called_at(module: cst.Module, line: int, numpy: set[str]) -> cst.FunctionDef | None:
    """The NumPy helper (a function at the top of this file) called on ``line``."""
    helpers = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef) and is_numpy_helper(s, numpy)}
    where = positions(module)
    for node in walk(module):
        if isinstance(node, cst.Call) and dotted_name(node.func) in helpers \
                and where[node].start.line <= line <= where[node].end.line:
            return helpers[dotted_name(node.func)]
    return None


def _numpy_alias(module: cst.Module) -> str | None:
    """The name the file binds NumPy to at its top (``np``), None when it binds none (then ``import numpy``)."""
    return next((name for name in sorted(numpy_names(module)) if binds_at_top(module, name)), None)


def _op_definition(helper: str, op: str, params: list[_Param], np: str) -> list[cst.BaseStatement]:
    signature = ", ".join(f"{p.name}: {p.schema}" + (f" = {p.default}" if p.default is not None else "") for p in params)
    plain = ", ".join(p.name + (f"={p.default}" if p.default is not None else "") for p in params)
    passed = ", ".join(p.passed for p in params)
    concrete = ", ".join(p.concrete for p in params)
    code = (f'@torch.library.custom_op(f"{{__name__.replace(\'.\', \'_\')}}::{helper.lstrip("_")}", mutates_args=())\n'
            f"def {op}({signature}) -> torch.Tensor:\n"
            f"    return torch.tensor({helper}({passed}))\n\n\n"
            f"@{op}.register_fake\n"
            f"def {op}_fake({plain}):\n"
            f"    # the output's shape and dtype from one real call on the same numbers; NumPy's draws are put back\n"
            f"    state = {np}.random.get_state()\n"
            f"    try:\n"
            f"        out = torch.tensor({helper}({concrete}))\n"
            f"    finally:\n"
            f"        {np}.random.set_state(state)\n"
            f"    return torch.empty(out.shape, dtype=out.dtype)\n")
    statements: list[cst.BaseStatement] = list(cst.parse_module(code).body)
    first = statements[0]
    assert isinstance(first, cst.FunctionDef)
    statements[0] = first.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    return statements


def _on_result(conversion: _Conversion, op_call: cst.BaseExpression) -> cst.BaseExpression:
    """``op(...)`` or ``op(...).to(device=..., dtype=...)``: the conversion's keywords on the op's result."""
    if not conversion.keywords:
        return op_call
    keywords = ", ".join(f"{a.keyword.value}={expression_code(a.value)}" for a in conversion.keywords if a.keyword)
    return cst.parse_expression(f"{expression_code(op_call)}.to({keywords})")


def numpy_helper_op(module: cst.Module, _source: str, site: BreakSite, _offers: Offers) -> Rewrite | None:
    if not site.caller:
        return None
    numpy = numpy_names(module)
    helper = _called_at(module, site.line, numpy)
    params = None if helper is None else _params(helper)
    conversions = [] if helper is None else _conversions(module, helper.name.value)
    if helper is None or params is None or not conversions:
        return None
    name = helper.name.value
    op = f"_{name.lstrip('_')}_op"
    new: dict[cst.CSTNode, cst.CSTNode] = {}
    for c in conversions:
        op_call = c.call.with_changes(func=cst.Name(op))
        if c.call in (a.value for a in c.converted.args):
            new[c.converted] = _on_result(c, op_call)
        else:
            new[c.call] = op_call
            new[c.converted] = _on_result(c, c.converted.args[0].value)
    rewritten = replace_each(module, new)
    anchor = next(s for s in rewritten.body if isinstance(s, cst.FunctionDef) and s.name.value == name)
    np = _numpy_alias(module)
    rewritten = replace_run(rewritten, anchor, 1, [anchor, *_op_definition(name, op, params, np or "numpy")])
    rewritten = ensure_import(rewritten if np else ensure_import(rewritten, "numpy"), "torch")
    line = positions(module)[helper].start.line
    return Rewrite("numpy-helper-op", f"run {name}() and the tensor made of its result as one custom op in the graph: "
                   f"{op}(), @torch.library.custom_op beside {name}() (line {line}), called at {len(conversions)} "
                   f"{'place' if len(conversions) == 1 else 'places'}, its fake from one real call",
                   f"{name}() computes with NumPy on the host, which Dynamo cannot trace", site.line,
                   rewritten.code, opaque=True)
