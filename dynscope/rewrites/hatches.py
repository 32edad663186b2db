"""Torch's escape hatches, the general fallback for a break inside a function: the smallest enclosing
function that takes and returns tensors is decorated, so that Dynamo stops tracing into it and the
graph keeps it as one opaque call instead of breaking around it.

- ``nonstrict-trace``: ``@torch._dynamo.nonstrict_trace``. Dynamo does not trace the body; AOT
  autograd does (with backend="eager" the Python function runs as it is), so the body must be
  torch code that traces without Python decisions on tensor values.
- ``leaf-function``: ``@torch._dynamo.decorators.leaf_function``. Nobody traces the body: the
  Python runs at every call, and a fake function gives the output's shape to the compiler. The
  fake written here says "like the first argument" (``torch.empty_like``); the trial turns on
  ``leaf_function_validate_outputs``, so a function whose output differs in shape, dtype or
  layout fails its trial instead of being believed.

Anchored at the ``def`` line: every break in one function is served by one remedy (one trial).
Both are torch's private names (the remedy says so: a public change that passes goes first), and
each is offered only where the installed torch has it (``Offers``). The order of preference
(docs/rewrites.md): a change that keeps the graph whole, then an opaque call in the graph (these), then
the code moved to eager (``torch.compiler.disable``).
"""

from __future__ import annotations

import libcst as cst

from dynscope.rewrites import BreakSite, Offers, Rewrite
from dynscope.rewrites.locate import ensure_import, functions_around, positions, replace, replace_run, walk
from dynscope.rewrites.numpy_calls import is_numpy_helper, numpy_names

_NOT_TENSORS = frozenset({"int", "float", "str", "bool", "None", "bytes", "complex"})


def _annotation(node: cst.Annotation | None) -> str:
    expression = node.annotation if node is not None else None
    return expression.value if isinstance(expression, cst.Name) else ""


def _own_nodes(function: cst.FunctionDef) -> list[cst.CSTNode]:
    """The nodes of ``function``'s body, leaving out those of functions and classes defined in it."""
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(child for child in node.children if not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)))
    return found


def _tensor_parameters(function: cst.FunctionDef, *, method: bool) -> list[cst.Param]:
    """The parameters that may be tensors: all but ``self``/``cls`` and those annotated as plain Python values."""
    params = [*function.params.posonly_params, *function.params.params]
    if method and params and params[0].name.value in ("self", "cls"):
        params = params[1:]
    return [p for p in params if _annotation(p.annotation) not in _NOT_TENSORS]


def takes_and_returns_tensors(function: cst.FunctionDef, *, method: bool) -> bool:
    """Whether ``function`` looks like tensors in, tensors out, with nothing a hatch cannot carry: a
    parameter that may be a tensor, a ``return`` of a value, no ``yield``, no ``global``/``nonlocal``
    (state shared with the compiled code is lost across the hatch), not async, not decorated."""
    if function.asynchronous is not None or function.decorators:
        return False
    if _annotation(function.returns) in _NOT_TENSORS:
        return False
    own = _own_nodes(function)
    if any(isinstance(node, (cst.Yield, cst.Global, cst.Nonlocal, cst.Await)) for node in own):
        return False
    returns = [node for node in own if isinstance(node, cst.Return)]
    if not returns or any(r.value is None or (isinstance(r.value, cst.Name) and r.value.value == "None") for r in returns):
        return False
    return bool(_tensor_parameters(function, method=method))


def hatch_target(module: cst.Module, site: BreakSite, offers: Offers, *, methods: bool) -> cst.FunctionDef | None:
    """The function to decorate: the outermost one around the break line (a nested function would be
    decorated again at every call of its parent), when it takes and returns tensors, is not a host-side
    NumPy helper, and neither it nor one around the line is a function the program gave torch.compile
    (the whole compiled call would be opaque, or the decorated function would never run compiled)."""
    around = functions_around(module, site.line)
    if not around:
        return None
    function = around[0]
    if is_numpy_helper(function, numpy_names(module)):
        return None  # arrays in, arrays out: disable-numpy-helper's (a hatch carries tensors)
    top_level = any(statement is function for statement in module.body)
    if any(f.name.value in offers.compiled for f in around) or (not top_level and not methods):
        return None
    if not top_level and not _in_class_body(module, function):
        return None
    return function if takes_and_returns_tensors(function, method=not top_level) else None


def _in_class_body(module: cst.Module, function: cst.FunctionDef) -> bool:
    return any(isinstance(node, cst.ClassDef) and any(statement is function for statement in node.body.body)
               for node in walk(module))


def _decorated(function: cst.FunctionDef, decorator: str) -> cst.FunctionDef:
    """``function`` with ``@decorator`` above its ``def`` (its leading blank lines and comments kept above)."""
    return function.with_changes(leading_lines=[], decorators=[
        cst.Decorator(cst.parse_expression(decorator), leading_lines=function.leading_lines)])


def nonstrict_trace(module: cst.Module, _source: str, site: BreakSite, offers: Offers) -> Rewrite | None:
    function = hatch_target(module, site, offers, methods=True)
    if function is None:
        return None
    rewritten = ensure_import(replace(module, function, _decorated(function, "torch._dynamo.nonstrict_trace")),
                              "torch._dynamo")
    name, line = function.name.value, positions(module)[function].start.line
    return Rewrite("nonstrict-trace", f"keep {name}() in the graph as one opaque call: @torch._dynamo.nonstrict_trace "
                   f"on its def (line {line})",
                   f"{name}() holds code Dynamo cannot trace; AOT autograd traces it whole", line,
                   rewritten.code, opaque=True)


def leaf_function(module: cst.Module, _source: str, site: BreakSite, offers: Offers) -> Rewrite | None:
    function = hatch_target(module, site, offers, methods=False)
    if function is None:
        return None
    first = _tensor_parameters(function, method=False)[0].name.value
    name, line = function.name.value, positions(module)[function].start.line
    fake = cst.parse_statement(f"@{name}.register_fake\ndef _{name}_fake{_signature(function)}:\n"
                               f"    return torch.empty_like({first})\n")
    assert isinstance(fake, cst.FunctionDef)
    fake = fake.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    decorated = _decorated(function, "torch._dynamo.decorators.leaf_function")
    rewritten = ensure_import(replace_run(module, function, 1, [decorated, fake]), "torch._dynamo.decorators")
    return Rewrite("leaf-function", f"run {name}() as one opaque call in the graph: "
                   f"@torch._dynamo.decorators.leaf_function on its def (line {line}), its output shaped like {first}",
                   f"{name}() holds code Dynamo cannot trace; it runs as Python at every call", line,
                   rewritten.code, settings=("leaf_function_validate_outputs",), opaque=True)


def _signature(function: cst.FunctionDef) -> str:
    """The parameter list of ``function`` as written (the fake takes the same arguments)."""
    return "(" + cst.Module(body=[]).code_for_node(function.params) + ")"
