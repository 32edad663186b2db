"""A graph with its inputs, and the edits the minimizer makes to it.

A Fragment is pure data: the structural graph JSON that dynscope records for every FX stage
(dynscope.probes.fx_graphs, encoding 2) plus one input spec per placeholder. Edits return
new fragments and never import torch, so the parent process can shrink graphs while the
worker process only rebuilds and runs them.

Input specs:
  {"kind": "tensor", "shape": [..], "stride": [..], "dtype": "float32", "device": "cpu",
   "requires_grad": bool}
  {"kind": "int" | "float" | "bool", "value": ...}
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

_FLOATING = ("float", "bfloat", "complex")
COMPUTE_OPS = ("call_function", "call_method", "call_module")

# Targets whose result is random: eager and compiled draw different numbers, so comparing
# their values says nothing (minifier/checks.py skips the accuracy check of such a fragment).
_RANDOM_OP_WORDS = ("dropout", "rand", "bernoulli", "normal", "multinomial", "uniform", "exponential", "poisson",
                    "cauchy", "geometric", "log_normal")


@dataclass(frozen=True)
class Fragment:
    graph: dict[str, Any]
    inputs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return self.graph["nodes"]

    @property
    def compute_nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.nodes if n["op"] in COMPUTE_OPS]

    @property
    def placeholders(self) -> list[dict[str, Any]]:
        return [n for n in self.nodes if n["op"] == "placeholder"]

    def to_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "inputs": self.inputs}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fragment:
        return cls(data["graph"], list(data.get("inputs", [])))

    def digest(self) -> str:
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def has_random_ops(self) -> bool:
        return any(any(word in n["target"].lower() for word in _RANDOM_OP_WORDS) for n in self.compute_nodes)

    def devices(self) -> set[str]:
        return {str(s.get("device", "cpu")).split(":")[0] for s in self.inputs if s.get("kind") == "tensor"}

    def ops(self) -> list[str]:
        return [n["target"] for n in self.compute_nodes]


def keep_only(fragment: Fragment, keep: set[str], outputs: list[str] | None = None) -> Fragment | None:
    """The subgraph of the compute nodes in ``keep``. A value a kept node needs from a
    dropped node becomes a new input (shaped like it); ``outputs`` default to the kept nodes
    no other kept node uses. None when a needed value cannot become an input (a tuple, or
    a tensor of symbolic shape)."""
    nodes = fragment.nodes
    by_name = {n["name"]: n for n in nodes}
    specs = dict(zip((p["name"] for p in fragment.placeholders), fragment.inputs))
    kept = [n for n in nodes if n["op"] in COMPUTE_OPS and n["name"] in keep]
    if not kept:
        return None
    needed: list[str] = []
    for node in kept:
        for name in node.get("inputs", ()):
            if name not in keep and name not in needed:
                needed.append(name)
    requires_grad = _requires_grad(fragment)
    new_placeholders, new_inputs = [], []
    for node in nodes:  # original placeholders first, in order, then new ones in graph order
        if node["name"] not in needed:
            continue
        if node["op"] == "placeholder":
            new_placeholders.append(node)
            new_inputs.append(specs[node["name"]])
    for node in nodes:
        if node["name"] not in needed or node["op"] == "placeholder":
            continue
        spec = _input_spec_for(node, requires_grad.get(node["name"], False))
        if spec is None:
            return None
        new_placeholders.append(_as_placeholder(node))
        new_inputs.append(spec)
    if outputs is None:
        used = {name for n in kept for name in n.get("inputs", ())}
        outputs = [n["name"] for n in kept if n["name"] not in used]
    graph = dict(fragment.graph)
    graph["nodes"] = [*new_placeholders, *kept, _output_node(outputs, by_name)]
    return Fragment(graph, new_inputs)


def can_stand_alone(fragment: Fragment, name: str) -> bool:
    """Whether the node can be fed by fresh inputs: every value it reads is an input or a
    tensor of known, concrete shape."""
    by_name = {n["name"]: n for n in fragment.nodes}
    return all(by_name[i]["op"] == "placeholder" or _input_spec_for(by_name[i], False) is not None
               for i in by_name[name].get("inputs", ()) if i in by_name)


def prefix(fragment: Fragment, count: int) -> Fragment | None:
    """The first ``count`` compute nodes, returning every value that later nodes (or the
    graph's output) used from them: a failure that shows in any of them stays visible."""
    compute = [n["name"] for n in fragment.compute_nodes]
    keep = set(compute[:count])
    users: dict[str, set[str]] = {}
    for node in fragment.nodes:
        for name in node.get("inputs", ()):
            users.setdefault(name, set()).add(node["name"])
    outputs = [name for name in compute[:count] if users.get(name, set()) - keep or not users.get(name)]
    if compute[count - 1] not in outputs:
        outputs.append(compute[count - 1])
    return keep_only(fragment, keep, outputs)


def with_small_inputs(fragment: Fragment, limit: int) -> Fragment | None:
    """Every tensor input with each dimension cut to at most ``limit`` (strides recomputed in
    the same dimension order); None when nothing would change."""
    changed = False
    inputs = []
    for spec in fragment.inputs:
        if spec.get("kind") != "tensor" or not all(isinstance(d, int) for d in spec["shape"]):
            inputs.append(spec)
            continue
        shape = [min(d, limit) for d in spec["shape"]]
        if shape != spec["shape"]:
            changed = True
        inputs.append({**spec, "shape": shape, "stride": _strides_like(shape, spec.get("stride"))})
    if not changed:
        return None
    graph = copy.deepcopy(fragment.graph)
    for node, spec in zip((n for n in graph["nodes"] if n["op"] == "placeholder"), inputs):
        if isinstance(node.get("tensor"), dict) and spec.get("kind") == "tensor":
            node["tensor"] = {**node["tensor"], "shape": spec["shape"], "stride": spec["stride"]}
    return Fragment(graph, inputs)


def _strides_like(shape: list[int], old_stride: list[Any] | None) -> list[int]:
    """Contiguous strides for ``shape``, laid out in the order of the old strides (so a
    channels-last or transposed input stays so)."""
    rank = len(shape)
    if old_stride and len(old_stride) == rank and all(isinstance(s, int) for s in old_stride):
        order = sorted(range(rank), key=lambda i: (old_stride[i], i))  # innermost first
    else:
        order = list(reversed(range(rank)))
    stride = [0] * rank
    step = 1
    for i in order:
        stride[i] = step
        step *= max(shape[i], 1)
    return stride


def _requires_grad(fragment: Fragment) -> dict[str, bool]:
    """Which values need gradients: an input that does, and what floats are computed from one."""
    flags = {p["name"]: bool(s.get("requires_grad")) for p, s in zip(fragment.placeholders, fragment.inputs)}
    for node in fragment.nodes:
        if node["op"] in COMPUTE_OPS:
            meta = node.get("tensor")
            floating = isinstance(meta, dict) and str(meta.get("dtype", "")).startswith(_FLOATING)
            flags[node["name"]] = floating and any(flags.get(i, False) for i in node.get("inputs", ()))
    return flags


def _input_spec_for(node: dict[str, Any], requires_grad: bool) -> dict[str, Any] | None:
    meta = node.get("tensor")
    if not isinstance(meta, dict) or "shape" not in meta:
        return None
    shape, stride = meta["shape"], meta.get("stride")
    if not all(isinstance(d, int) for d in shape) or (stride and not all(isinstance(s, int) for s in stride)):
        return None  # symbolic sizes: no concrete tensor to make
    return {"kind": "tensor", "shape": list(shape), "stride": list(stride) if stride else _strides_like(shape, None),
            "dtype": meta.get("dtype", "float32"), "device": meta.get("device", "cpu"),
            "requires_grad": requires_grad}


def _as_placeholder(node: dict[str, Any]) -> dict[str, Any]:
    entry = {"name": node["name"], "op": "placeholder", "target": node["name"], "args": [], "kwargs": {},
             "inputs": []}
    if "tensor" in node:
        entry["tensor"] = node["tensor"]
    return entry


def _output_node(outputs: list[str], by_name: dict[str, dict[str, Any]]) -> dict[str, Any]:
    original = next((n for n in by_name.values() if n["op"] == "output"), None)
    name = original["name"] if original else "output"
    return {"name": name, "op": "output", "target": "output",
            "args": [{"$": "tuple", "items": [{"node": o} for o in outputs]}], "kwargs": {}, "inputs": list(outputs)}
