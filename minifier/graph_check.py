"""A graph read from a file (a capture, failure.json), checked and made safe to generate code
from before anything else uses it (no torch here).

The graph's names become Python source: torch.fx writes a placeholder's name into
``def forward(self, <name>)`` and every node's name into ``<name> = ...``, so a name such as
``l_x_=__import__('os').system('...')`` would run when the module is built and land in
repro.py. Every name that is not a plain identifier (graph_ops.plain_name) is renamed here,
consistently in every reference: placeholders to ``arg<i>``, other nodes to ``node_<i>``.
What cannot be renamed (keyword-argument names, a dtype, a device) must already be plain, or
the graph is refused with one line. So is a graph whose structure is not what the recorder
writes: a node that is not an object, a reference to a value not defined before it, two
nodes of one name, nesting deeper than the recorder writes, an integer beyond 64 bits.

Whether each target may be called is graph_ops' table's decision (first_refusal here, and
minifier/rebuild.py again in the worker).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from dynscope.errors import DynscopeError
from dynscope.minifier import graph_ops

MAX_NODES = 100_000  # a large model's Dynamo graph has a few thousand
MAX_DEPTH = 32  # nesting of one argument (the recorder writes a few levels)
_INT64 = 1 << 63
_OPS = ("placeholder", "call_function", "call_method", "output")
_SYMBOLIC_SIZE = re.compile(r"[\w +\-*/%(),.]{1,200}")  # "s0", "2*s0 + 1", "Max(1, u0)"; never code
_DEVICE = re.compile(r"[a-z][a-z0-9_]{0,31}(:[0-9]{1,4})?")
_TYPED_NAMES = {"dtype": graph_ops.DTYPES, "layout": graph_ops.LAYOUTS, "memory_format": graph_ops.MEMORY_FORMATS}


class GraphError(DynscopeError):
    """A graph that is not safe or not well-formed enough to rebuild (one line, exit 2)."""


@dataclass(frozen=True)
class CheckedGraph:
    graph: dict[str, Any]
    renamed: dict[str, str] = field(default_factory=dict)  # old name -> new name

    def note(self) -> str | None:
        """One line for the report when names were changed."""
        if not self.renamed:
            return None
        new = ", ".join(list(self.renamed.values())[:5]) + (", …" if len(self.renamed) > 5 else "")
        return (f"renamed {len(self.renamed)} graph value(s) whose recorded names are not plain Python "
                f"identifiers (now {new})")


def checked_graph(graph: Any) -> CheckedGraph:
    """The graph with every name plain and every reference resolved, or GraphError."""
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
        raise GraphError("its recorded graph is not a graph")
    nodes = graph["nodes"]
    if not nodes or len(nodes) > MAX_NODES:
        raise GraphError(f"its recorded graph has {len(nodes)} nodes (1 to {MAX_NODES} can be minified)")
    renamed = _new_names(nodes)
    checked: list[dict[str, Any]] = []
    defined: set[str] = set()
    for index, raw in enumerate(nodes):
        op = raw.get("op")
        name = raw["name"]
        where = f"node {index}"
        if op in ("get_attr", "call_module"):
            checked.append(_copy_as_is(raw, renamed, defined, where))
        elif op not in _OPS:
            raise GraphError(f"{where} has an unknown kind {str(op)[:40]!r}")
        else:
            checked.append(_checked_node(raw, renamed, defined, where))
        defined.add(name)
    if checked[-1]["op"] != "output" or sum(n["op"] == "output" for n in checked) != 1:
        raise GraphError("its recorded graph does not end with its one output")
    return CheckedGraph({**graph, "nodes": checked}, renamed)


def checked_inputs(inputs: Any, placeholders: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Input specs (one per placeholder, minifier/fragment.py's forms) checked like the graph."""
    if not isinstance(inputs, list) or len(inputs) != len(placeholders):
        raise GraphError(f"its graph has {len(placeholders)} inputs but {len(inputs) if isinstance(inputs, list) else 'no'} "
                         "input descriptions")
    specs = []
    for index, spec in enumerate(inputs):
        where = f"input {index}"
        if not isinstance(spec, dict):
            raise GraphError(f"{where} is not described")
        kind = spec.get("kind")
        if kind == "tensor":
            _check_tensor_meta(spec, where, symbolic=False)
            if not isinstance(spec.get("requires_grad", False), bool):
                raise GraphError(f"{where}: requires_grad is not true or false")
        elif kind in ("int", "float", "bool"):
            value = spec.get("value")
            if not isinstance(value, (int, float)) or (isinstance(value, int) and not -_INT64 <= value < _INT64):
                raise GraphError(f"{where}: its value is not a number")
        specs.append(spec)
    return specs


def first_refusal(graph: dict[str, Any]) -> str | None:
    """The first node whose target graph_ops' table refuses, in words (None: all allowed)."""
    for node in graph["nodes"]:
        op = node["op"]
        if op in ("get_attr", "call_module"):
            return (f"cannot rebuild node {node['name']}: {op} nodes refer to objects of the original program, "
                    "which a graph's structure does not carry")
        refusal = (graph_ops.target_refusal(node["target"]) if op == "call_function"
                   else graph_ops.method_refusal(node["target"]) if op == "call_method" else None)
        if refusal is not None:
            return f"cannot rebuild node {node['name']}: {refusal}"
    return None


def _new_names(nodes: list[Any]) -> dict[str, str]:
    """old -> new for every name that is not plain; refuses unnamed and twice-named nodes."""
    seen: set[str] = set()
    for index, raw in enumerate(nodes):
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise GraphError(f"node {index} of its recorded graph is not a named node")
        if raw["name"] in seen:
            raise GraphError(f"node {index} of its recorded graph reuses the name of an earlier node")
        seen.add(raw["name"])
    renamed: dict[str, str] = {}
    taken = set(seen)
    placeholders = 0
    for index, raw in enumerate(nodes):
        is_input = raw.get("op") == "placeholder"
        if not graph_ops.plain_name(raw["name"]):
            new = f"arg{placeholders}" if is_input else f"node_{index}"
            while new in taken:
                new += "_"
            taken.add(new)
            renamed[raw["name"]] = new
        placeholders += is_input
    return renamed


def _checked_node(raw: dict[str, Any], renamed: dict[str, str], defined: set[str], where: str) -> dict[str, Any]:
    name = renamed.get(raw["name"], raw["name"])
    op = raw["op"]
    target = raw.get("target")
    if op == "placeholder":
        target = name  # the argument's name in forward(...): the node's own (plain) name
    elif op == "output":
        target = "output"
    elif not isinstance(target, str) or len(target) > 300:
        raise GraphError(f"{where}: its target is not a name")
    args, kwargs = raw.get("args", []), raw.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise GraphError(f"{where}: its arguments are not a list and a mapping")
    if not all(isinstance(k, str) and k.isidentifier() and not k.startswith("__") and len(k) <= 100 for k in kwargs):
        raise GraphError(f"{where}: its keyword arguments are not plain names")
    node = {**raw, "name": name, "target": target,
            "args": _checked_value(args, renamed, defined, where, 0),
            "kwargs": {k: _checked_value(v, renamed, defined, where, 0) for k, v in kwargs.items()},
            "inputs": _checked_inputs_of(raw, renamed, defined, where)}
    if raw.get("tensor") is not None:
        metas = raw["tensor"] if isinstance(raw["tensor"], list) else [raw["tensor"]]
        for meta in metas:
            if meta is not None:
                _check_tensor_meta(meta, where, symbolic=True)
    return node


def _copy_as_is(raw: dict[str, Any], renamed: dict[str, str], defined: set[str], where: str) -> dict[str, Any]:
    """A node that cannot be rebuilt (rebuild.py says so): kept, with plain names only."""
    return {"name": renamed.get(raw["name"], raw["name"]), "op": raw["op"], "target": str(raw.get("target"))[:300],
            "args": [], "kwargs": {}, "inputs": _checked_inputs_of(raw, renamed, defined, where)}


def _checked_inputs_of(raw: dict[str, Any], renamed: dict[str, str], defined: set[str], where: str) -> list[str]:
    inputs = raw.get("inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(i, str) and i in defined for i in inputs):
        raise GraphError(f"{where} uses a value that is not defined before it")
    return [renamed.get(i, i) for i in inputs if isinstance(i, str)]


def _checked_value(value: Any, renamed: dict[str, str], defined: set[str], where: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise GraphError(f"{where}: its arguments nest deeper than {MAX_DEPTH} levels")
    if isinstance(value, bool) or value is None or isinstance(value, (float, str)):
        return value
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise GraphError(f"{where}: an integer constant is out of range")
        return value
    if isinstance(value, list):
        return [_checked_value(v, renamed, defined, where, depth + 1) for v in value]
    if not isinstance(value, dict):
        raise GraphError(f"{where}: an argument is not a recorded value")
    if set(value) == {"node"}:
        ref = value["node"]
        if not isinstance(ref, str) or ref not in defined:
            raise GraphError(f"{where} uses a value that is not defined before it")
        return {"node": renamed.get(ref, ref)}
    kind = value.get("$")
    if kind in _TYPED_NAMES and value.get("name") not in _TYPED_NAMES[kind]:
        raise GraphError(f"{where}: its {kind} constant is not one torch has")
    if kind == "device" and not _is_device(value.get("type"), value.get("index")):
        raise GraphError(f"{where}: its device constant is not a device")
    return {k: (v if k == "$" else _checked_value(v, renamed, defined, where, depth + 1)) for k, v in value.items()}


def _check_tensor_meta(meta: Any, where: str, *, symbolic: bool) -> None:
    """Shape and stride are sizes (names of symbols too, in a graph's own metadata); dtype and
    device are plain names (repro.py writes them as code: ``torch.<dtype>``)."""
    if not isinstance(meta, dict):
        raise GraphError(f"{where}: its tensor description is not a mapping")
    for key in ("shape", "stride"):
        sizes = meta.get(key)
        if sizes is None and key == "stride":
            continue
        if not isinstance(sizes, list) or len(sizes) > 64 or not all(
                (isinstance(d, int) and not isinstance(d, bool) and 0 <= d < _INT64)
                or (symbolic and isinstance(d, str) and _SYMBOLIC_SIZE.fullmatch(d) is not None) for d in sizes):
            raise GraphError(f"{where}: its tensor {key} is not a list of sizes")
    if meta.get("dtype", "float32") not in graph_ops.DTYPES:
        raise GraphError(f"{where}: its dtype is not one torch has")
    device = str(meta.get("device", "cpu"))
    if not _DEVICE.fullmatch(device):
        raise GraphError(f"{where}: its device is not a device name")


def _is_device(kind: Any, index: Any) -> bool:
    return (isinstance(kind, str) and _DEVICE.fullmatch(kind) is not None and ":" not in kind
            and (index is None or (isinstance(index, int) and 0 <= index < 10_000)))
