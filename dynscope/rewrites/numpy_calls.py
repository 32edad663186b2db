"""NumPy inside compiled code.

- ``numpy-int-math``: ``np.lcm(a, b)`` / ``np.gcd(a, b)`` on Python ints gives a NumPy integer,
  which Dynamo treats as an array; a branch on it later is filed as "Data-dependent branching"
  (Reformer). ``math.lcm`` / ``math.gcd`` give a Python int. Rewritten where the call feeds the
  break line (in the line, in a name the line reads, or in a helper of this file it calls).
- ``numpy-to-torch``: a NumPy function applied to a tensor (``np.sqrt(t.sum())``) → its torch
  twin, by a table, only where the argument is plainly a tensor (a torch call or a tensor method).
- ``disable-numpy-helper``: a helper that builds NumPy arrays or draws from ``np.random`` (BigBird's
  random block masks) cannot be traced; ``@torch.compiler.disable`` on its ``def`` runs it in
  eager (the break moves out of the graph; fix's verdict says so). Works in an installed library's
  file too: fix serves the changed file through its shadow.
"""

from __future__ import annotations

import libcst as cst

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.locate import (
    all_nodes,
    dotted_name,
    ensure_import,
    functions_around,
    mentions,
    names_in,
    positions,
    replace,
    statements_at,
    walk,
)
from dynscope.rewrites.scalar_sizes import plainly_tensor

_INT_MATH = {"lcm", "gcd"}
# NumPy function -> torch function, for calls whose every positional argument is plainly a tensor
_TABLE = {"sqrt": "sqrt", "exp": "exp", "log": "log", "abs": "abs", "absolute": "abs", "maximum": "maximum",
          "minimum": "minimum", "clip": "clamp", "concatenate": "cat", "stack": "stack", "tanh": "tanh", "sin": "sin",
          "cos": "cos", "floor": "floor", "ceil": "ceil", "sign": "sign", "square": "square", "log1p": "log1p",
          "expm1": "expm1", "where": "where", "matmul": "matmul"}
_KEYWORDS = {"axis": "dim"}  # NumPy keyword -> torch keyword; any other keyword declines
_ARRAY_BUILDERS = {"array", "asarray", "zeros", "ones", "empty", "full", "arange", "linspace", "concatenate", "stack",
                   "vstack", "hstack", "permutation", "random", "eye", "tile", "repeat"}


def numpy_names(module: cst.Module) -> set[str]:
    """The names NumPy is bound to at the top of the module (``np``, ``numpy``)."""
    names: set[str] = set()
    for node in (inner for statement in module.body if not isinstance(statement, (cst.FunctionDef, cst.ClassDef))
                 for inner in walk(statement)):
        if isinstance(node, cst.Import):
            for alias in node.names:
                if dotted_name(alias.name) == "numpy":
                    asname = alias.asname.name if alias.asname is not None else None
                    names.add(asname.value if isinstance(asname, cst.Name) else "numpy")
    return names or {"np"}


def _numpy_function(call: cst.CSTNode, numpy: set[str]) -> str | None:
    """``lcm`` for ``np.lcm(...)``, ``random.seed`` for ``np.random.seed(...)``; None for calls outside NumPy."""
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
        return None
    root, _, inner = dotted_name(call.func.value).partition(".")
    if root not in numpy:
        return None
    return f"{inner}.{call.func.attr.value}" if inner else call.func.attr.value


# ---- numpy-int-math -------------------------------------------------------------------------------

def _int_math_calls(node: cst.CSTNode, numpy: set[str]) -> list[cst.Call]:
    nodes = all_nodes(node) if isinstance(node, cst.Module) else walk(node)
    return [inner for inner in nodes if isinstance(inner, cst.Call) and _numpy_function(inner, numpy) in _INT_MATH
            and len(inner.args) == 2 and all(arg.keyword is None and not arg.star for arg in inner.args)]


def _called_names(node: cst.CSTNode) -> set[str]:
    """``f`` for ``f(...)``, ``self.f(...)``, ``Cls.f(...)``: the names of functions a node calls."""
    found: set[str] = set()
    for inner in walk(node):
        if isinstance(inner, cst.Call):
            name = dotted_name(inner.func)
            if name:
                found.add(name.rpartition(".")[2])
    return found


def _feeding_statements(function: cst.FunctionDef | None, line_statements: list[cst.CSTNode]) -> list[cst.CSTNode]:
    """The break line's statements and, within its function, every assignment whose name they read,
    followed back through further assignments."""
    if function is None:
        return line_statements
    assigns = [node for node in walk(function.body) if isinstance(node, cst.Assign)]
    wanted = set().union(*(names_in(node) for node in line_statements)) if line_statements else set()
    feeding: list[cst.CSTNode] = list(line_statements)
    changed = True
    while changed:
        changed = False
        for assign in assigns:
            targets = {name for target in assign.targets for name in names_in(target.target)}
            if targets & wanted and assign not in feeding:
                feeding.append(assign)
                wanted |= names_in(assign.value)
                changed = True
    return feeding


def numpy_int_math(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    if not mentions(site, "branching", "jump", "numpy", "ndarray", "data dependent", "data-dependent"):
        return None
    numpy = numpy_names(module)
    if not _int_math_calls(module, numpy):
        return None
    functions = functions_around(module, site.line)
    on_line: list[cst.CSTNode] = list(statements_at(module, site.line))
    where = positions(module)
    on_line += [node for node in all_nodes(module) if isinstance(node, cst.If) and where[node.test].start.line <= site.line
                <= where[node.test].end.line]
    feeding = _feeding_statements(functions[-1] if functions else None, on_line)
    helpers = {node.name.value: node for node in all_nodes(module) if isinstance(node, cst.FunctionDef)}
    calls = [call for node in feeding for call in _int_math_calls(node, numpy)]
    for name in set().union(*(_called_names(node) for node in feeding)) if feeding else set():
        helper = helpers.get(name)
        if helper is not None:
            calls += _int_math_calls(helper, numpy)
    if not calls:
        return None
    rewritten = module
    for call in calls:
        function = _numpy_function(call, numpy)
        rewritten = replace(rewritten, call, call.with_changes(func=cst.parse_expression(f"math.{function}")))
    rewritten = ensure_import(rewritten, "math")
    used = sorted({f"np.{_numpy_function(call, numpy)}" for call in calls})
    return Rewrite("numpy-int-math", f"use math.{'/math.'.join(u[3:] for u in used)} instead of {'/'.join(used)} on Python ints",
                   f"{'/'.join(used)} returns a NumPy integer, which Dynamo traces as an array: a branch on it is filed "
                   "as data-dependent", site.line, rewritten.code)


# ---- numpy-to-torch -------------------------------------------------------------------------------

def _torch_twin(call: cst.Call, numpy: set[str]) -> cst.Call | None:
    function = _numpy_function(call, numpy)
    if function not in _TABLE:
        return None
    positional = [arg for arg in call.args if arg.keyword is None]
    if not positional or any(arg.star for arg in call.args):
        return None
    if any(arg.keyword is not None and arg.keyword.value not in _KEYWORDS for arg in call.args):
        return None
    tensors = positional[0].value.elements if function in ("concatenate", "stack") and isinstance(
        positional[0].value, (cst.List, cst.Tuple)) else [arg for arg in positional]
    values = [getattr(element, "value", element) for element in tensors]
    if function in ("clip",):
        values = values[:1]  # the bounds may be numbers
    if not values or not all(isinstance(value, cst.BaseExpression) and plainly_tensor(value) for value in values):
        return None
    args = [arg.with_changes(keyword=cst.Name(_KEYWORDS[arg.keyword.value])) if arg.keyword is not None else arg
            for arg in call.args]
    return call.with_changes(func=cst.parse_expression(f"torch.{_TABLE[function]}"), args=args)


def numpy_to_torch(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    numpy = numpy_names(module)
    for statement in statements_at(module, site.line):
        for call in walk(statement):
            if not isinstance(call, cst.Call):
                continue
            twin = _torch_twin(call, numpy)
            if twin is None:
                continue
            rewritten = ensure_import(replace(module, call, twin), "torch")
            return Rewrite("numpy-to-torch", f"use {dotted_name(twin.func)} instead of {dotted_name(call.func)} on a tensor "
                           f"(line {site.line})", f"{dotted_name(call.func)} on a tensor leaves torch for NumPy", site.line,
                           rewritten.code)
    return None


# ---- disable-numpy-helper -------------------------------------------------------------------------

_SMALL_HELPER = 30  # statements: a function this short that converts to NumPy and back is a helper


def is_numpy_helper(function: cst.FunctionDef, numpy: set[str], *, small_with_torch: bool = False) -> bool:
    """Whether a function works on the host with NumPy: draws from ``np.random`` or builds arrays, and
    touches no torch (a function that also computes with tensors would take its tensor work out of
    the graph: that is not a helper), unless ``small_with_torch``: then a short function (IBert's
    ``batch_frexp``: tensor -> NumPy -> tensor) that calls NumPy at all qualifies."""
    if function.name.value in ("forward", "__call__"):
        return False
    if "torch" in names_in(function.body):
        statements = sum(1 for node in walk(function.body) if isinstance(node, cst.SimpleStatementLine))
        if not small_with_torch or statements > _SMALL_HELPER:
            return False
        return any(isinstance(node, cst.Call) and _numpy_function(node, numpy) is not None for node in walk(function.body))
    for node in walk(function.body):
        if isinstance(node, cst.Attribute) and dotted_name(node.value) in numpy and node.attr.value == "random":
            return True
        if isinstance(node, cst.Call) and _numpy_function(node, numpy) in _ARRAY_BUILDERS:
            return True
    return False


def _already_disabled(function: cst.FunctionDef) -> bool:
    return any(dotted_name(d.decorator if not isinstance(d.decorator, cst.Call) else d.decorator.func).endswith(
        ("compiler.disable", "_dynamo.disable", "disable")) for d in function.decorators)


def disable_numpy_helper(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    numpy = numpy_names(module)
    functions = {node.name.value: node for node in all_nodes(module) if isinstance(node, cst.FunctionDef)}
    around = functions_around(module, site.line)
    candidates: list[cst.FunctionDef] = []
    # a helper the break line calls first, then the function the line is in
    for statement in statements_at(module, site.line):
        for name in sorted(_called_names(statement)):
            helper = functions.get(name)
            if helper is not None and helper not in candidates and is_numpy_helper(helper, numpy):
                candidates.append(helper)
    # the break inside a short function that goes through NumPy (IBert's batch_frexp breaks at np.frexp
    # and again at the decimal loop after it): that function is the helper
    if around and around[-1] not in candidates and is_numpy_helper(around[-1], numpy, small_with_torch=True):
        candidates.append(around[-1])
    for helper in candidates:
        if _already_disabled(helper):
            continue
        decorated = helper.with_changes(decorators=[*helper.decorators, cst.Decorator(cst.parse_expression("torch.compiler.disable"))])
        if not helper.decorators:
            decorated = decorated.with_changes(leading_lines=[], decorators=[
                cst.Decorator(cst.parse_expression("torch.compiler.disable"), leading_lines=helper.leading_lines)])
        rewritten = ensure_import(replace(module, helper, decorated), "torch")
        line = positions(module)[helper].start.line
        return Rewrite("disable-numpy-helper", f"run the NumPy helper {helper.name.value}() in eager: @torch.compiler.disable "
                       f"on its def (line {line})",
                       f"{helper.name.value}() works with NumPy on the host (random numbers or arrays), which Dynamo cannot "
                       "put in a graph", site.line, rewritten.code, leaves_graph=True)
    return None
