"""Rebuild a runnable torch.fx.GraphModule from a graph's structural JSON.

Nothing is executed or unpickled from the JSON: each node's target is looked up by name in
minifier/graph_ops.py's table (never by walking attributes the JSON names), constants are
decoded from their typed forms (dynscope.probes.fx_graphs), every name that reaches generated
code must be a plain identifier (minifier/graph_check.py renames the others before this), and
the graph is built node by node through torch.fx's API. Anything else is refused with one line
saying which node and why.
"""

from __future__ import annotations

import builtins
import math
import operator
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from dynscope.errors import DynscopeError
from dynscope.minifier import graph_ops
from dynscope.minifier.fragment import Fragment
from dynscope.minifier.standalone import rand_strided

_INT64 = 1 << 63


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
            if not graph_ops.plain_name(name):
                raise RebuildError("its name is not a plain Python identifier")
            if op == "placeholder":
                node = fx_graph.placeholder(name)
            elif op == "output":
                args = decode(raw.get("args", []), env)
                fx_graph.output(args[0] if len(args) == 1 else tuple(args))
                continue
            elif op == "call_function":
                target = resolve_target(raw["target"])
                node = fx_graph.call_function(target, tuple(decode(raw.get("args", []), env)),
                                              _kwargs(raw.get("kwargs", {}), env))
            elif op == "call_method":
                method = _checked_method(raw["target"])
                node = fx_graph.call_method(method, tuple(decode(raw.get("args", []), env)),
                                            _kwargs(raw.get("kwargs", {}), env))
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


def _kwargs(value: Any, env: dict[str, torch.fx.Node]) -> dict[str, Any]:
    """Keyword arguments: their names become code (``f(x, name=...)``), so each must be a plain
    identifier."""
    if not isinstance(value, dict) or not all(isinstance(k, str) and k.isidentifier() and not k.startswith("__")
                                              for k in value):
        raise RebuildError("its keyword arguments are not plain names")
    return {k: decode(v, env) for k, v in value.items()}


def decode(value: Any, env: dict[str, torch.fx.Node]) -> Any:
    """A JSON-encoded argument back to its Python value (node references to graph nodes)."""
    if isinstance(value, list):
        return [decode(v, env) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
        raise RebuildError(f"its integer constant {value} is out of range")
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
        return _torch_attr(value["name"], torch.dtype, graph_ops.DTYPES)
    if kind == "layout":
        return _torch_attr(value["name"], torch.layout, graph_ops.LAYOUTS)
    if kind == "memory_format":
        return _torch_attr(value["name"], torch.memory_format, graph_ops.MEMORY_FORMATS)
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
    """A node target's qualified name to the callable, if graph_ops' table has it."""
    refusal = graph_ops.target_refusal(qualified)
    if refusal is not None:
        raise RebuildError(refusal)
    module, _, name = qualified.rpartition(".")
    if module in ("operator", "_operator"):
        return getattr(operator, name)
    if module == "math":
        return getattr(math, name)
    if module in ("builtins", ""):
        return getattr(builtins, name)
    op = graph_ops.op_target(qualified)
    if op is not None:
        return _op_overload(qualified, *op)
    return _torch_function(qualified)


def _op_overload(qualified: str, namespace: str, name: str, overload: str) -> Any:
    """An aten or prims overload, looked up through torch.ops' namespace by operator and
    overload name (the namespace resolves registered operators only). graph_ops refused the
    operators known to touch files; an overload with a file name or storage argument is
    refused here too."""
    try:
        packet = getattr({"aten": torch.ops.aten, "prims": torch.ops.prims}[namespace], name)
    except (AttributeError, RuntimeError):
        packet = None
    if not isinstance(packet, torch._ops.OpOverloadPacket) or overload not in packet.overloads():
        raise RebuildError(f"target {qualified} is not an operator this torch has")
    op = getattr(packet, overload)
    schema = getattr(op, "_schema", None)
    if not isinstance(op, torch._ops.OpOverload) or any(
            a.name == "filename" or "Storage" in str(a.type) for a in getattr(schema, "arguments", ())):
        raise RebuildError(f"target {qualified} is not an allowed graph operation")
    return op


def _torch_function(qualified: str) -> Any:
    """A torch function of the table: the path walked is the table's own entry (equal to
    ``qualified``), and the function found must carry that same name."""
    from torch.fx.node import _get_qualified_name

    obj: Any = torch
    for part in qualified.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            raise RebuildError(f"target {qualified} does not exist in this torch")
    try:
        same = callable(obj) and _get_qualified_name(obj) == qualified
    except Exception:  # torch's own naming fails on a few C objects
        same = False
    if not same:
        raise RebuildError(f"target {qualified} is not an allowed graph operation")
    return obj


def _checked_method(name: str) -> str:
    refusal = graph_ops.method_refusal(name)
    if refusal is not None or not hasattr(torch.Tensor, name):
        raise RebuildError(refusal or f"method {name!r} is not a tensor method of this torch")
    return name


def _torch_attr(name: Any, kind: type, table: frozenset[str]) -> Any:
    value = getattr(torch, name, None) if isinstance(name, str) and name in table else None
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
    _check_input_memory(fragment, usable)
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


def input_memory_limit() -> int:
    """Bytes the random inputs of one check may take together: half this machine's memory (a
    recorded shape is a number a file states; filling it must not take the machine down)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 1 << 34


def _check_input_memory(fragment: Fragment, usable: dict[str, Any]) -> None:
    total = 0
    for placeholder, spec in zip(fragment.placeholders, fragment.inputs):
        if spec.get("kind") != "tensor" or placeholder["name"] in usable:
            continue
        shape, stride = list(spec["shape"]), list(spec.get("stride") or [])
        elements = math.prod(shape) if not stride else (
            1 + sum((d - 1) * s for d, s in zip(shape, stride)) if all(d > 0 for d in shape) else 0)
        # rand_strided draws float64 values, then converts: 8 bytes more per element while it does
        total += max(elements, 0) * (_torch_attr(spec["dtype"], torch.dtype, graph_ops.DTYPES).itemsize + 8)
    limit = input_memory_limit()
    if total > limit:
        raise RebuildError(f"its inputs would take {total / 2**30:.1f} GiB, more than half this machine's memory "
                           f"({2 * limit / 2**30:.1f} GiB)")


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
    dtype = _torch_attr(spec["dtype"], torch.dtype, graph_ops.DTYPES)
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
