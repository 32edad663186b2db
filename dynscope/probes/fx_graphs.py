"""Structural FX graphs for every stage torch prints.

Torch prints each stage's graph with ``GraphModule.print_readable`` right before it logs
it (dynamo output graph, AOT joint/forward/backward/inference, pre/post-grad). Wrapping
that one method gives us the live GraphModule of every stage on every torch version,
at no cost when torch isn't printing. We serialize the graph at print time (later passes
mutate it) and keep it keyed by the printed text; the trace handler claims it when the
event carrying that text arrives.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

# Trace events whose payload is a print_readable() of the stage graph.
GRAPH_EVENTS = frozenset(
    {
        "dynamo_output_graph",
        "aot_joint_graph",
        "aot_forward_graph",
        "aot_backward_graph",
        "aot_inference_graph",
        "artifact:before_pre_grad_graph",
        "artifact:after_pre_grad_graph",
        "artifact:before_post_grad_graph",
        "artifact:inductor_post_grad_graph",
        "inductor_post_grad_graph",  # torch <= 2.6 logs it as an event of its own, not an artifact
    }
)

_MAX_PENDING = 32
_MAX_CONST_REPR = 120
_MAX_ORIGIN_DEPTH = 8

# Version of the graph JSON. 2: constants are encoded exactly (typed forms for tuples,
# dtypes, devices, slices, non-finite floats...; strings kept whole), so that the minifier
# can rebuild a graph from its structure alone. Version 1 (no "encoding" key) kept short
# reprs and wrote tuples as lists: fine to display, not enough to rebuild.
GRAPH_ENCODING = 2


class PrintedGraphs:
    """Graphs serialized at print time, waiting for their trace event."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def add(self, printed: str, graph: dict[str, Any]) -> None:
        with self._lock:
            self._pending[printed] = graph
            self._pending.move_to_end(printed)
            while len(self._pending) > _MAX_PENDING:
                self._pending.popitem(last=False)

    def claim(self, payload: str) -> dict[str, Any] | None:
        """The graph whose printed text the payload is (or starts with: some events append a footer)."""
        with self._lock:
            graph = self._pending.get(payload)
            if graph is None:
                for printed in reversed(self._pending):
                    if payload.startswith(printed):
                        graph = self._pending[printed]
                        break
            return graph


def patch_print_readable(graph_module_cls: Any, sink: PrintedGraphs, on_error: Callable[[str], None]):
    """Wrap ``print_readable``; returns the function that undoes it."""
    original = graph_module_cls.print_readable

    def print_readable(self, *args: Any, **kwargs: Any):
        printed = original(self, *args, **kwargs)
        colored = kwargs.get("colored", args[3] if len(args) > 3 else False)
        if isinstance(printed, str) and not colored:
            try:
                sink.add(printed, serialize_graph(self))
            except Exception as e:  # never let a probe break the compile
                on_error(f"fx graph serialization failed: {type(e).__name__}: {e}")
        return printed

    print_readable.__wrapped__ = original  # type: ignore[attr-defined]
    graph_module_cls.print_readable = print_readable

    def undo() -> None:
        graph_module_cls.print_readable = original

    return undo


def serialize_graph(gm: Any) -> dict[str, Any]:
    """A JSON-able description of an FX graph: nodes, their inputs, tensor meta and origins."""
    nodes = []
    for node in gm.graph.nodes:
        meta = node.meta
        entry: dict[str, Any] = {
            "name": node.name,
            "op": node.op,
            "target": _target_name(node),
            "args": [_arg(a) for a in node.args],  # the top level is always a tuple
            "kwargs": {str(k): _arg(v) for k, v in node.kwargs.items()},
            "inputs": [n.name for n in node.all_input_nodes],
        }
        tensor = _tensor_meta(meta.get("val", meta.get("example_value")))
        if tensor is not None:
            entry["tensor"] = tensor
        stack = meta.get("stack_trace")
        if stack:
            entry["stack_trace"] = stack
        module_stack = meta.get("nn_module_stack")
        if module_stack:
            entry["module_stack"] = [[str(v[0]), _type_name(v[1])] for v in module_stack.values() if len(v) >= 2]
        origins = meta.get("from_node")
        if origins:
            entry["from_node"] = [_origin(o, 0) for o in origins]
        original_aten = meta.get("original_aten")
        if original_aten is not None:
            entry["original_aten"] = str(original_aten)
        seq = meta.get("seq_nr")
        if seq is not None:
            entry["seq_nr"] = seq
        if meta.get("partitioner_tag"):
            entry["partitioner_tag"] = str(meta["partitioner_tag"])
        nodes.append(entry)
    # torch's NodeSource.graph_id is id() of the graph a node came from: keeping ours lets
    # the model follow a post-grad node's origins back into earlier stages.
    return {"graph_id": id(gm.graph), "encoding": GRAPH_ENCODING, "nodes": nodes}


def _target_name(node: Any) -> str:
    target = node.target
    if isinstance(target, str):
        return target
    try:
        from torch.fx.node import _get_qualified_name

        return _get_qualified_name(target)
    except Exception:
        return str(target)


def _arg(value: Any) -> Any:
    """Encode a node argument exactly, as JSON.

    Node references become {"node": name}; lists, str-keyed dicts, None, bools, ints, finite
    floats and strings stay themselves; everything else that can be carried exactly gets a
    typed form {"$": kind, ...} (see ``_typed``). Anything else keeps a short repr,
    {"repr": text}, which can be shown but not rebuilt.
    """
    from torch.fx import Node

    if isinstance(value, Node):
        return {"node": value.name}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$": "float", "value": repr(value)}
    if isinstance(value, list):
        return [_arg(v) for v in value]
    if isinstance(value, tuple):
        return {"$": "tuple", "items": [_arg(v) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and not _looks_typed(value):
            return {k: _arg(v) for k, v in value.items()}
        return {"$": "dict", "items": [[_arg(k), _arg(v)] for k, v in value.items()]}
    typed = _typed(value)
    if typed is not None:
        return typed
    text = repr(value)
    return {"repr": text if len(text) <= _MAX_CONST_REPR else text[:_MAX_CONST_REPR] + "…"}


def _looks_typed(value: dict[str, Any]) -> bool:
    """A plain dict that a reader would mistake for one of our encoded forms."""
    return "$" in value or (len(value) == 1 and next(iter(value)) in ("node", "repr"))


def _typed(value: Any) -> dict[str, Any] | None:
    import torch

    if isinstance(value, torch.dtype):
        return {"$": "dtype", "name": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"$": "device", "type": value.type, "index": value.index}
    if isinstance(value, torch.layout):
        return {"$": "layout", "name": str(value).removeprefix("torch.")}
    if isinstance(value, torch.memory_format):
        return {"$": "memory_format", "name": str(value).removeprefix("torch.")}
    if isinstance(value, slice):
        return {"$": "slice", "start": _arg(value.start), "stop": _arg(value.stop), "step": _arg(value.step)}
    if value is Ellipsis:
        return {"$": "ellipsis"}
    if isinstance(value, complex):
        return {"$": "complex", "real": _arg(value.real), "imag": _arg(value.imag)}
    return None


def _tensor_meta(val: Any) -> dict[str, Any] | list | None:
    if isinstance(val, (list, tuple)):
        metas = [_tensor_meta(v) for v in val]
        return metas if any(m is not None for m in metas) else None
    shape = getattr(val, "shape", None)
    dtype = getattr(val, "dtype", None)
    if shape is None or dtype is None:
        if type(val).__name__ in ("SymInt", "SymFloat", "SymBool"):
            return {"sym": str(val)}
        return None
    meta: dict[str, Any] = {"shape": [_dim(d) for d in shape], "dtype": str(dtype).replace("torch.", "")}
    try:
        meta["stride"] = [_dim(s) for s in val.stride()]
    except Exception:
        pass
    device = getattr(val, "device", None)
    if device is not None:
        meta["device"] = str(device)
    return meta


def _dim(d: Any) -> int | str:
    return d if isinstance(d, int) else str(d)


def _type_name(t: Any) -> str:
    return getattr(t, "__qualname__", None) or str(t)


def _origin(source: Any, depth: int) -> dict[str, Any]:
    entry = {
        "name": getattr(source, "name", str(source)),
        "graph_id": getattr(source, "graph_id", None),
        "pass_name": getattr(source, "pass_name", None),
    }
    parents = getattr(source, "from_node", None)
    if parents and depth < _MAX_ORIGIN_DEPTH:
        entry["from_node"] = [_origin(p, depth + 1) for p in parents]
    return entry
