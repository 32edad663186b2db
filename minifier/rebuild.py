"""Rebuild a runnable torch.fx.GraphModule from a graph's structural JSON.

Nothing is executed or unpickled from the JSON: each node's target is a qualified name that
is resolved against an allow-list of namespaces (torch operators and functions, operator,
math, a few pure builtins), constants are decoded from their typed forms
(dynscope.probes.fx_graphs), and the graph is built node by node through torch.fx's API.
Anything else is refused with one line saying which node and why.
"""

from __future__ import annotations

import builtins
import math
import operator
import types
from typing import Any, Callable

import torch
import torch.fx

from dynscope.errors import DynscopeError
from dynscope.minifier.fragment import Fragment
from dynscope.minifier.standalone import rand_strided

# Pure builtins that Dynamo may leave in a graph. eval/exec/open/__import__/getattr and
# friends are not here, and so are refused.
_SAFE_BUILTINS = frozenset({"abs", "all", "any", "bool", "divmod", "float", "int", "len", "max", "min", "pow",
                            "round", "sum", "isinstance"})
# torch.* Python functions are allowed only from modules that compute on tensors.
_TORCH_FUNCTION_MODULES = frozenset({
    "torch", "torch.functional", "torch.nn.functional", "torch._refs", "torch._decomp.decompositions",
    "torch.amp.autocast_mode", "torch.autograd.grad_mode", "torch.fx.experimental.sym_node",
    "torch._tensor", "torch.random", "torch.special", "torch.linalg", "torch.fft",
})
# Built-in (C) functions of torch that read or write files or load code.
_REFUSED_TORCH_NAMES = frozenset({"from_file", "load", "save", "import_ir_module", "_load_for_lite_interpreter",
                                  "load_library", "compile"})
# operator functions that call or build callables.
_REFUSED_OPERATORS = frozenset({"call", "attrgetter", "itemgetter", "methodcaller"})
# Tensor methods that take callables or hooks.
_REFUSED_METHODS = frozenset({"apply_", "map_", "map2_", "register_hook", "register_post_accumulate_grad_hook"})


class RebuildError(DynscopeError):
    """A graph that cannot be rebuilt from its structure (one line for the user)."""


def build_module(graph: dict[str, Any]) -> torch.fx.GraphModule:
    if graph.get("encoding", 1) < 2:
        raise RebuildError("this graph was recorded by an older dynscope, which stored constants only as text: "
                           "record the run again to minify it")
    fx_graph = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}
    for raw in graph["nodes"]:
        name, op = raw["name"], raw["op"]
        try:
            if op == "placeholder":
                node = fx_graph.placeholder(name)
            elif op == "output":
                args = decode(raw.get("args", []), env)
                fx_graph.output(args[0] if len(args) == 1 else tuple(args))
                continue
            elif op == "call_function":
                target = resolve_target(raw["target"])
                node = fx_graph.call_function(target, tuple(decode(raw.get("args", []), env)),
                                              decode(raw.get("kwargs", {}), env))
            elif op == "call_method":
                method = _checked_method(raw["target"])
                node = fx_graph.call_method(method, tuple(decode(raw.get("args", []), env)),
                                            decode(raw.get("kwargs", {}), env))
            else:
                raise RebuildError(f"{op} nodes refer to objects of the original program, which a graph's "
                                   "structure does not carry")
        except RebuildError as e:
            raise RebuildError(f"cannot rebuild node {name}: {e}") from None
        node.name = name
        env[name] = node
    module = torch.fx.GraphModule(torch.nn.Module(), fx_graph)
    module.graph.lint()
    return module


def decode(value: Any, env: dict[str, torch.fx.Node]) -> Any:
    """A JSON-encoded argument back to its Python value (node references to graph nodes)."""
    if isinstance(value, list):
        return [decode(v, env) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"node"}:
        ref = value["node"]
        if ref not in env:
            raise RebuildError(f"it uses {ref}, which is not defined before it")
        return env[ref]
    if set(value) == {"repr"}:
        raise RebuildError(f"its constant {value['repr']} was recorded only as text")
    kind = value.get("$")
    if kind is None:
        return {k: decode(v, env) for k, v in value.items()}
    if kind == "tuple":
        return tuple(decode(v, env) for v in value["items"])
    if kind == "dict":
        return {decode(k, env): decode(v, env) for k, v in value["items"]}
    if kind == "dtype":
        return _torch_attr(value["name"], torch.dtype)
    if kind == "layout":
        return _torch_attr(value["name"], torch.layout)
    if kind == "memory_format":
        return _torch_attr(value["name"], torch.memory_format)
    if kind == "device":
        return torch.device(value["type"], value["index"]) if value.get("index") is not None else torch.device(value["type"])
    if kind == "slice":
        return slice(decode(value["start"], env), decode(value["stop"], env), decode(value["step"], env))
    if kind == "ellipsis":
        return Ellipsis
    if kind == "float":
        return float(value["value"])  # "inf", "-inf", "nan"
    if kind == "complex":
        return complex(value["real"], value["imag"])
    raise RebuildError(f"its constant has an unknown encoding {kind!r}")


def resolve_target(qualified: str) -> Callable[..., Any]:
    """A node target's qualified name to the callable, if it is an allowed graph operation."""
    module, _, name = qualified.rpartition(".")
    if module in ("operator", "_operator"):
        return _from_module(operator, name, qualified, lambda f: name not in _REFUSED_OPERATORS)
    if module == "math":
        return _from_module(math, name, qualified, lambda f: True)
    if module in ("builtins", ""):
        if name in _SAFE_BUILTINS:
            return getattr(builtins, name)
        raise RebuildError(f"target {qualified} is not an allowed graph operation")
    if qualified.startswith("torch.ops."):
        return _torch_op(qualified)
    if qualified.startswith("torch."):
        return _torch_function(qualified)
    raise RebuildError(f"target {qualified} is not an allowed graph operation")


def _from_module(module: types.ModuleType, name: str, qualified: str, allowed: Callable[[Any], bool]) -> Any:
    fn = getattr(module, name, None)
    if fn is None or name.startswith("__") or not callable(fn) or not allowed(fn):
        raise RebuildError(f"target {qualified} is not an allowed graph operation")
    return fn


def _torch_op(qualified: str) -> Any:
    obj: Any = torch.ops
    for part in qualified.split(".")[2:]:  # namespace, operator, overload
        try:
            obj = getattr(obj, part)
        except (AttributeError, RuntimeError):
            raise RebuildError(f"target {qualified} is not an operator this torch has "
                               "(a custom operator must be registered in the process that runs it)") from None
    if isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator)):
        return obj
    raise RebuildError(f"target {qualified} is not an operator")


def _torch_function(qualified: str) -> Any:
    obj: Any = torch
    parts = qualified.split(".")[1:]
    for part in parts:
        if part.startswith("__") or part in _REFUSED_TORCH_NAMES:
            raise RebuildError(f"target {qualified} is not an allowed graph operation")
        obj = getattr(obj, part, None)
        if obj is None:
            raise RebuildError(f"target {qualified} does not exist in this torch")
    if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return obj  # torch's C functions: torch.relu, torch._C._nn.linear, ...
    if isinstance(obj, (types.FunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)) and (
        getattr(obj, "__module__", None) in _TORCH_FUNCTION_MODULES or isinstance(obj, types.MethodDescriptorType)
    ):
        return obj
    if isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return obj
    raise RebuildError(f"target {qualified} is not an allowed graph operation")


def _checked_method(name: str) -> str:
    if name in _REFUSED_METHODS or (name.startswith("_") and not _is_operator_dunder(name)) or not hasattr(torch.Tensor, name):
        raise RebuildError(f"method {name!r} is not an allowed tensor method")
    return name


def _is_operator_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and hasattr(operator, name)


def _torch_attr(name: str, kind: type) -> Any:
    value = getattr(torch, name, None)
    if not isinstance(value, kind):
        raise RebuildError(f"torch.{name} is not a {kind.__name__}")
    return value


# -- inputs -----------------------------------------------------------------------------------


def make_inputs(fragment: Fragment, values: dict[str, Any] | None = None, seed: int = 0) -> list[Any]:
    """Inputs for a fragment: the recorded value of an input where there is one of the same
    shape (matched by name), else a random one of the recorded shape, strides, dtype and
    device (like torch's own repro scripts: normal floats, zero integers, so indices stay
    valid)."""
    generator = torch.Generator().manual_seed(seed)
    usable = recorded_inputs(fragment, values)
    made = []
    for placeholder, spec in zip(fragment.placeholders, fragment.inputs):
        if placeholder["name"] in usable:
            made.append(usable[placeholder["name"]])
            continue
        kind = spec.get("kind")
        if kind == "tensor":
            made.append(_random_tensor(spec, generator))
        elif kind in ("int", "float", "bool"):
            made.append({"int": int, "float": float, "bool": bool}[kind](spec["value"]))
        else:
            raise RebuildError(f"input {placeholder['name']} has an unknown kind {kind!r}")
    return made


def recorded_inputs(fragment: Fragment, values: dict[str, Any] | None) -> dict[str, Any]:
    """The recorded values that fit the fragment's inputs (same name, same shape)."""
    if not values:
        return {}
    return {p["name"]: values[p["name"]] for p, spec in zip(fragment.placeholders, fragment.inputs)
            if p["name"] in values and _fits(values[p["name"]], spec)}


def _fits(value: Any, spec: dict[str, Any]) -> bool:
    if isinstance(value, torch.Tensor):
        return spec.get("kind") == "tensor" and list(value.shape) == list(spec["shape"])
    return spec.get("kind") != "tensor"


def _random_tensor(spec: dict[str, Any], generator: torch.Generator) -> torch.Tensor:
    dtype = _torch_attr(spec["dtype"], torch.dtype)
    shape, stride = list(spec["shape"]), list(spec.get("stride") or [])
    if not stride:
        stride = list(torch.empty(shape, device="meta").stride())
    requires_grad = bool(spec.get("requires_grad")) and (dtype.is_floating_point or dtype.is_complex)
    return rand_strided(shape, stride, dtype, spec.get("device", "cpu"), generator, requires_grad)


def load_values(path: str, names: list[str]) -> dict[str, Any]:
    """Recorded input values by input name: saved with torch.save, read back without
    unpickling anything but tensors and numbers (weights_only=True)."""
    loaded = torch.load(path, weights_only=True, map_location=None)
    if not isinstance(loaded, list):
        raise RebuildError(f"{path} does not hold a list of inputs")
    return dict(zip(names, loaded))


def describe_input(value: Any) -> dict[str, Any]:
    """The input spec of a live value (what Dynamo passed to the backend)."""
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "shape": [_int(d) for d in value.shape], "stride": [_int(s) for s in value.stride()],
                "dtype": str(value.dtype).removeprefix("torch."), "device": str(value.device),
                "requires_grad": bool(value.requires_grad)}
    if isinstance(value, bool):
        return {"kind": "bool", "value": value}
    if isinstance(value, (int, torch.SymInt)):
        return {"kind": "int", "value": _int(value)}
    if isinstance(value, (float, torch.SymFloat)):
        return {"kind": "float", "value": float(value)}
    return {"kind": type(value).__name__}


def _int(value: Any) -> int:
    return int(value)
