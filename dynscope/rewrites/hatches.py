"""Torch's escape hatches, the general fallback for a break inside a function: the smallest enclosing
function that takes and returns tensors is decorated, so that Dynamo stops tracing into it and the
graph keeps it as one opaque call instead of breaking around it.

- ``nonstrict-trace``: ``@torch._dynamo.nonstrict_trace``. Dynamo does not trace the body; AOT
  autograd does (with backend="eager" the Python function runs as it is), so the body must be
  torch code that traces without Python decisions on tensor values.
- ``leaf-function``: ``@torch._dynamo.decorators.leaf_function``. Nobody traces the body: the
  Python runs at every call, and a fake function gives the output's shape to the compiler. The
  fake written here says "like the first argument the body uses as a tensor" (``torch.empty_like``);
  the trial turns on ``leaf_function_validate_outputs``, so a function whose output differs in shape,
  dtype or layout fails its trial instead of being believed.
- ``leaf-method``: the same for a method (a module's ``forward`` with an expert loop, say). torch's
  decorator does not take a method that Dynamo reaches through ``Module.__call__``, but it takes a
  module as an argument (its parameters keep their gradients): the body moves to a module-level
  function decorated so, beside the class, and the method calls it with ``self``.

Anchored at the ``def`` line: every break in one function is served by one remedy (one trial).
All three are torch's private names (the remedy says so: a public change that passes goes first), and
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
    if any(_compiled(module, f, offers) for f in around) or (not top_level and not methods):
        return None
    if not top_level and not _in_class_body(module, function):
        return None
    return function if takes_and_returns_tensors(function, method=not top_level) else None


def _compiled(module: cst.Module, function: cst.FunctionDef, offers: Offers) -> bool:
    """Whether the program gave ``function`` to torch.compile: by its first line where recorded, else by name."""
    if offers.compiled_lines:
        span = positions(module)[function]
        return bool({span.start.line, positions(module)[function.name].start.line} & offers.compiled_lines)
    return function.name.value in offers.compiled


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


# what is read off a tensor: a parameter used so is the one the fake's output copies
_TENSOR_USES = frozenset({
    "shape", "size", "dtype", "device", "dim", "ndim", "numel", "view", "reshape", "float", "half", "long", "bool",
    "to", "type_as", "new_empty", "new_zeros", "new_ones", "transpose", "permute", "unsqueeze", "squeeze", "flatten",
    "expand", "contiguous", "clone", "detach", "sum", "mean", "max", "min", "abs", "any", "all", "masked_fill",
    "matmul", "softmax", "split", "chunk", "unbind", "is_floating_point", "requires_grad"})


def _shaped_like(function: cst.FunctionDef, *, method: bool) -> str:
    """The parameter the fake's output is shaped like: the first that the body uses as a tensor (``x.shape``,
    ``x.float()``...), else the first that may be a tensor (an ``int`` size before it is not the output's shape)."""
    candidates = [p.name.value for p in _tensor_parameters(function, method=method)]
    used = {node.value.value for node in _own_nodes(function) if isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name) and node.attr.value in _TENSOR_USES}
    return next((name for name in candidates if name in used), candidates[0])


def _fake(name: str, function: cst.FunctionDef, like: str) -> cst.FunctionDef:
    fake = cst.parse_statement(f"@{name}.register_fake\ndef {name.lstrip('_')}_fake{_signature(function)}:\n"
                               f"    return torch.empty_like({like})\n")
    assert isinstance(fake, cst.FunctionDef)
    return fake.with_changes(name=cst.Name(f"_{name.lstrip('_')}_fake"), leading_lines=[cst.EmptyLine(), cst.EmptyLine()])


def leaf_function(module: cst.Module, _source: str, site: BreakSite, offers: Offers) -> Rewrite | None:
    function = hatch_target(module, site, offers, methods=False)
    if function is None:
        return None
    first = _shaped_like(function, method=False)
    name, line = function.name.value, positions(module)[function].start.line
    fake = _fake(name, function, first)
    decorated = _decorated(_copies_first(function, method=False), "torch._dynamo.decorators.leaf_function")
    rewritten = ensure_import(replace_run(module, function, 1, [decorated, fake]), "torch._dynamo.decorators")
    return Rewrite("leaf-function", f"run {name}() as one opaque call in the graph: "
                   f"@torch._dynamo.decorators.leaf_function on its def (line {line}), its output shaped like {first}",
                   f"{name}() holds code Dynamo cannot trace; it runs as Python at every call", line,
                   rewritten.code, settings=("leaf_function_validate_outputs",), opaque=True)


def _written(function: cst.FunctionDef, *, method: bool) -> list[str]:
    """The parameters the body writes into in place (``p[m] = v``, ``p += v``, ``p.add_(v)``): torch's leaf function
    must not mutate its inputs (autograd refuses an in-place write to the leaf it passes in)."""
    names = [p.name.value for p in _tensor_parameters(function, method=method)]
    written: set[str] = set()
    for node in _own_nodes(function):
        target = None
        if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Subscript):
            target = node.target.value
        elif isinstance(node, cst.AugAssign):
            target = node.target
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value.endswith("_") \
                and not node.func.attr.value.startswith("_"):
            target = node.func.value
        if isinstance(target, cst.Name):
            written.add(target.value)
    return [name for name in names if name in written]


def _copies_first(function: cst.FunctionDef, *, method: bool) -> cst.FunctionDef:
    """``function`` with a copy of each parameter it writes into made first (after its docstring)."""
    copies = [cst.parse_statement(f"if isinstance({name}, torch.Tensor):\n    {name} = {name}.clone()\n")
              for name in _written(function, method=method)]
    if not copies or not isinstance(function.body, cst.IndentedBlock):
        return function
    body = list(function.body.body)
    docstring = 1 if body and function.get_docstring(clean=False) is not None else 0
    return function.with_changes(body=function.body.with_changes(body=[*body[:docstring], *copies, *body[docstring:]]))


def leaf_method(module: cst.Module, _source: str, site: BreakSite, offers: Offers) -> Rewrite | None:
    function = hatch_target(module, site, offers, methods=True)
    owner = None if function is None else _top_level_class(module, function)
    if function is None or owner is None or not _movable(function):
        return None
    helper = f"_{owner.name.value}_{function.name.value}_leaf"
    first = _shaped_like(function, method=True)
    call = cst.parse_statement(f"return {helper}({_arguments(function)})\n")
    stub = function.with_changes(body=cst.IndentedBlock(body=[call]))
    moved = _copies_first(function, method=True).with_changes(
        name=cst.Name(helper), leading_lines=[cst.EmptyLine(), cst.EmptyLine()],
        decorators=[cst.Decorator(cst.parse_expression("torch._dynamo.decorators.leaf_function"))])
    rewritten = replace_run(module, owner, 1, [owner.deep_replace(function, stub), moved, _fake(helper, function, first)])
    rewritten = ensure_import(rewritten, "torch._dynamo.decorators")
    name, line = function.name.value, positions(module)[function].start.line
    return Rewrite("leaf-method", f"run {owner.name.value}.{name}() as one opaque call in the graph: its body moved to "
                   f"{helper}() beside the class, decorated @torch._dynamo.decorators.leaf_function, the method calling "
                   f"it with self (line {line}); its output shaped like {first}",
                   f"{name}() holds code Dynamo cannot trace; it runs as Python at every call", line,
                   rewritten.code, settings=("leaf_function_validate_outputs",), opaque=True)


def _top_level_class(module: cst.Module, function: cst.FunctionDef) -> cst.ClassDef | None:
    return next((statement for statement in module.body if isinstance(statement, cst.ClassDef)
                 and any(inner is function for inner in statement.body.body)), None)


def _movable(function: cst.FunctionDef) -> bool:
    """A method whose body means the same outside its class: plain parameters (``self`` first, no ``*args``), no
    ``super()`` or ``__class__`` (they need the class cell), no private ``__name`` (mangled by the class)."""
    params = function.params
    if isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None or params.posonly_params:
        return False
    if not params.params or params.params[0].name.value != "self":
        return False
    names = [node.value for node in _own_nodes(function) if isinstance(node, cst.Name)]
    return not any(n in ("super", "__class__") or (n.startswith("__") and not n.endswith("__")) for n in names)


def _arguments(function: cst.FunctionDef) -> str:
    """The call that passes a method's parameters on, each as itself."""
    params = function.params
    return ", ".join([p.name.value for p in params.params] + [f"{p.name.value}={p.name.value}" for p in params.kwonly_params])


def _signature(function: cst.FunctionDef) -> str:
    """The parameter list of ``function`` as written (the fake takes the same arguments)."""
    return "(" + cst.Module(body=[]).code_for_node(function.params) + ")"
