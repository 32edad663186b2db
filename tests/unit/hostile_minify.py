"""Forging what `dynscope minify --from` reads: a capture's recorded Dynamo graph and its
recorded torch settings, rewritten the way an attacker would (the blob's hash and size stay
consistent, so every integrity check passes and only the content is hostile). No torch here.
"""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hostile import add_payload

from dynscope.store.writer import CaptureWriter

GRAPH_EVENT = "dynscope:fx_graph"


def recorded_graph(path: Path) -> dict[str, Any]:
    """The structural graph JSON of the capture's first recorded Dynamo graph."""
    from dynscope.store.reader import CaptureReader

    with sqlite3.connect(path) as db:
        digest = db.execute("SELECT payload FROM events WHERE name = ? ORDER BY id LIMIT 1", (GRAPH_EVENT,)).fetchone()[0]
    reader = CaptureReader(str(path))
    try:
        return json.loads(reader.payload(digest))
    finally:
        reader.close()


def forge(base: Path, out: Path, *, graph: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
          settings: dict[str, dict[str, Any]] | None = None) -> Path:
    """A copy of ``base`` whose Dynamo graph is ``graph(recorded graph)`` and whose recorded
    settings (compilation_metrics' config dumps) have ``settings`` merged in."""
    shutil.copyfile(base, out)
    if graph is not None:
        text = json.dumps(graph(copy.deepcopy(recorded_graph(base))))
        digest = add_payload(out, text)
        with sqlite3.connect(out) as db:
            db.execute("UPDATE events SET payload = ? WHERE name = ?", (digest, GRAPH_EVENT))
    if settings:
        set_recorded_settings(out, settings)
    return out


def set_recorded_settings(path: Path, settings: dict[str, dict[str, Any]]) -> None:
    fields = {"torch._inductor.config": "inductor_config", "torch._dynamo.config": "dynamo_config"}
    with sqlite3.connect(path) as db:
        for id_, meta in list(db.execute("SELECT id, metadata FROM events WHERE name = 'compilation_metrics'")):
            data = json.loads(meta)
            metrics = data["compilation_metrics"]
            for module, values in settings.items():
                dump = json.loads(metrics.get(fields[module]) or "{}")
                dump.update(values)
                metrics[fields[module]] = json.dumps(dump)
            db.execute("UPDATE events SET metadata = ? WHERE id = ?", (json.dumps(data), id_))


def rename(graph: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """Every occurrence of a value's name (its node, references, inputs lists) renamed."""
    def swap(value: Any) -> Any:
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, dict):
            if set(value) == {"node"}:
                return {"node": new if value["node"] == old else value["node"]}
            return {k: swap(v) for k, v in value.items()}
        return value

    for node in graph["nodes"]:
        if node["name"] == old:
            node["name"] = new
            if node["op"] == "placeholder":
                node["target"] = new
        node["args"] = swap(node.get("args", []))
        node["kwargs"] = swap(node.get("kwargs", {}))
        node["inputs"] = [new if i == old else i for i in node.get("inputs", [])]
    return graph


def node(graph: dict[str, Any], name: str) -> dict[str, Any]:
    return next(n for n in graph["nodes"] if n["name"] == name)


def call(name: str, target: str, args: list[Any], inputs: list[str], *, op: str = "call_function",
         kwargs: dict[str, Any] | None = None, like: dict[str, Any] | None = None) -> dict[str, Any]:
    """A call node as the recorder writes one (tensor metadata copied from ``like``)."""
    entry = {"name": name, "op": op, "target": target, "args": args, "kwargs": kwargs or {}, "inputs": inputs}
    if like is not None and "tensor" in like:
        entry["tensor"] = copy.deepcopy(like["tensor"])
    return entry


def returning(graph: dict[str, Any], *names: str) -> dict[str, Any]:
    """The graph's output node made to return ``names``."""
    output = graph["nodes"][-1]
    output["args"] = [{"$": "tuple", "items": [{"node": n} for n in names]}]
    output["inputs"] = list(names)
    return graph


def graph_capture(path: Path, graph: dict[str, Any], settings: dict[str, dict[str, Any]] | None = None) -> Path:
    """A capture written by the real writer holding one compile whose Dynamo graph is
    ``graph`` (for tests that must not import torch: the same events a recorded run has)."""
    writer = CaptureWriter(path)
    writer.set_meta(dynscope_version="0", torch_version="2.13.0", python="3.11", cwd=str(path.parent),
                    command=["dynscope", "explain", "prog.py"], started=1.0, finished=2.0, exit_code=0)
    writer.append("dynamo_start", {"dynamo_start": {"stack": []}}, compile_id="0/0", attempt=0)
    stage = writer.append("dynamo_output_graph", {"dynamo_output_graph": {"sizes": {}}},
                          "def forward(self, x):\n    return x\n", compile_id="0/0", attempt=0)
    writer.append(GRAPH_EVENT, {"event_id": stage, "stage_event": "dynamo_output_graph"}, json.dumps(graph),
                  compile_id="0/0")
    dumps = {"inductor_config": json.dumps((settings or {}).get("torch._inductor.config", {})),
             "dynamo_config": json.dumps((settings or {}).get("torch._dynamo.config", {}))}
    writer.append("compilation_metrics", {"compilation_metrics": {"compile_id": "0/0", "co_name": "f", **dumps}},
                  compile_id="0/0")
    writer.close()
    return path


def sin_graph(placeholder: str = "l_x_") -> dict[str, Any]:
    """The graph Dynamo records for ``torch.sin(x) * 2 + 1`` on a float32 [4] (encoding 2)."""
    meta = {"shape": [4], "dtype": "float32", "stride": [1], "device": "cpu"}
    return {"graph_id": 1, "encoding": 2, "nodes": [
        {"name": placeholder, "op": "placeholder", "target": placeholder, "args": [], "kwargs": {}, "inputs": [],
         "tensor": dict(meta)},
        {"name": "sin", "op": "call_function", "target": "torch.sin", "args": [{"node": placeholder}], "kwargs": {},
         "inputs": [placeholder], "tensor": dict(meta)},
        {"name": "mul", "op": "call_function", "target": "_operator.mul", "args": [{"node": "sin"}, 2], "kwargs": {},
         "inputs": ["sin"], "tensor": dict(meta)},
        {"name": "add", "op": "call_function", "target": "_operator.add", "args": [{"node": "mul"}, 1], "kwargs": {},
         "inputs": ["mul"], "tensor": dict(meta)},
        {"name": "output", "op": "output", "target": "output", "args": [{"$": "tuple", "items": [{"node": "add"}]}],
         "kwargs": {}, "inputs": ["add"]},
    ]}
