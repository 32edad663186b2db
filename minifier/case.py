"""The case being minified: a failing graph, its inputs, how it was compiled and how it failed.

A case comes from the detection run (``failure.json`` written by minifier/probe.py, or a
graph record named by the crash marker) or from a capture (``--from CAPTURE --compile ID``:
the Dynamo graph's structure and input shapes as the capture recorded them). Only JSON is
read; nothing from a capture or the run is executed. Whatever the source (a failure.json can
come from a tarball too, with --resume), the graph goes through minifier/graph_check.py
(names made plain, structure checked) and the settings through minifier/replay_settings.py
(only those that change lowering or numerics are kept); both say in the report what they
changed or dropped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from dynscope.errors import DynscopeError
from dynscope.minifier import replay_settings
from dynscope.minifier.attribution import Attribution
from dynscope.minifier.fragment import Fragment
from dynscope.minifier.graph_check import GraphError, checked_graph, checked_inputs, first_refusal
from dynscope.minifier.signature import Signature


@dataclass
class Case:
    fragment: Fragment
    backend: dict[str, Any]  # {"name", "options", "mode", "custom", "label"} (compat.describe_backend)
    configs: dict[str, dict[str, Any]]
    grad_enabled: bool
    compile_id: str | None
    target: Signature | None  # None until a check shows how it fails (a case from a capture)
    kind: str | None = None
    attribution: Attribution | None = None
    values: dict[str, Any] | None = None  # {"path", "names"}: recorded input values
    accuracy: dict[str, float] | None = None  # the tolerances the failure was found with
    exception_text: str | None = None
    notes: list[str] = field(default_factory=list)
    dropped_settings: list[str] = field(default_factory=list)  # recorded, not applied (replay_settings)

    @property
    def custom_backend(self) -> bool:
        return bool(self.backend.get("custom"))


def case_from_failure(data: dict[str, Any], out_dir: str) -> Case:
    if not isinstance(data, dict):
        raise DynscopeError(f"{out_dir}: the recorded failure is not a failure record")
    fragment, notes = _checked_fragment(data.get("graph"), data.get("inputs"), "the recorded failure")
    values = None
    if data.get("values"):
        values = {"path": os.path.join(out_dir, os.path.basename(str(data["values"]))),
                  "names": [p["name"] for p in fragment.placeholders]}
    case = Case(
        fragment=fragment,
        backend={},
        configs={},
        grad_enabled=bool(data.get("grad_enabled", True)),
        compile_id=_text(data.get("compile_id")),
        target=Signature.from_json(_mapping(data.get("signature"))),
        kind=_text(data.get("kind")),
        attribution=Attribution.from_json(_mapping(data.get("attribution"))),
        values=values,
        accuracy=_tolerances(data.get("accuracy")),
        exception_text=_text((_mapping(data.get("exception")) or {}).get("traceback"), 100_000),
        notes=[*notes, *[str(n)[:1000] for n in _sequence(data.get("notes"))]],
    )
    _apply_settings(case, data.get("backend"), data.get("configs"))
    return case


def case_from_graph_record(data: dict[str, Any], signature: Signature) -> Case:
    """A graph the program was compiling or running when it crashed or hung."""
    if not isinstance(data, dict):
        raise DynscopeError("the recorded graph is not a graph record")
    fragment, notes = _checked_fragment(data.get("graph"), data.get("inputs"), "the recorded graph")
    case = Case(fragment, {}, {}, bool(data.get("grad_enabled", True)), _text(data.get("compile_id")), signature,
                signature.kind, notes=notes)
    _apply_settings(case, data.get("backend"), data.get("configs"))
    return case


def apply_recorded_configs(case: Case, configs: dict[str, dict[str, Any]]) -> None:
    """A capture's non-default settings (the worker compared its dumps with torch's defaults)."""
    case.configs, dropped = replay_settings.split(configs)
    _drop(case, dropped)


def _apply_settings(case: Case, backend: Any, configs: Any) -> None:
    case.backend, dropped_options = replay_settings.checked_backend(backend)
    case.configs, dropped = replay_settings.split(configs or {})
    _drop(case, dropped + dropped_options)


def _drop(case: Case, dropped: list[str]) -> None:
    case.dropped_settings = dropped
    _note(case, replay_settings.dropped_note(dropped))


def _checked_fragment(graph: Any, inputs: Any, what: str) -> tuple[Fragment, list[str]]:
    try:
        checked = checked_graph(graph)
        fragment = Fragment(checked.graph, [])
        specs = checked_inputs(inputs, fragment.placeholders)
    except GraphError as e:
        raise DynscopeError(f"{what} cannot be minified: {e}") from None
    note = checked.note()
    return Fragment(checked.graph, specs), [note] if note else []


def _note(case: Case, note: str | None) -> None:
    if note:
        case.notes.append(note)


def _text(value: Any, limit: int = 200) -> str | None:
    return str(value)[:limit] if value is not None else None


def _mapping(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _sequence(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _tolerances(value: Any) -> dict[str, float] | None:
    """{"rtol", "atol"} as numbers (repro.py writes them as code), else None."""
    if not isinstance(value, dict):
        return None
    try:
        return {"rtol": float(value["rtol"]), "atol": float(value["atol"])}
    except (KeyError, TypeError, ValueError):
        return None


def case_from_capture(path: str, compile_id: str, backend: str) -> tuple[Case, dict[str, dict[str, Any]]]:
    """The Dynamo graph of one compile in a capture. Returns the case and the full config
    dumps the capture holds for it (the worker reduces them to non-default values)."""
    from dynscope.model import Capture

    with Capture.open(path) as capture:
        compile_ = capture.compile(compile_id)
        stages = capture.stages(compile_id)
        dynamo = next((s for s in stages if s.name == "dynamo" and s.recorded and s.structure_hash), None)
        if dynamo is None:
            raise DynscopeError(f"compile {compile_id} in {path} has no recorded Dynamo graph to minify "
                                f"({_why_no_graph(compile_, stages)})")
        graph = capture.reader.json_payload(dynamo.structure_hash)
        if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
            raise DynscopeError(f"compile {compile_id} in {path}: its recorded Dynamo graph is not a graph")
        dumps = _config_dumps(capture, compile_id)
    encoding = graph.get("encoding", 1)
    if not isinstance(encoding, int) or encoding < 2:
        raise DynscopeError(f"{path} was recorded by an older dynscope, which kept graph constants only as text: "
                            "record the run again (dynscope explain, or dynscope minify SCRIPT)")
    try:
        checked = checked_graph(graph)
    except GraphError as e:
        raise DynscopeError(f"compile {compile_id} in {path} cannot be minified: {e}") from None
    refusal = first_refusal(checked.graph)  # before any worker starts: the table refuses it anyway
    if refusal is not None:
        raise DynscopeError(f"compile {compile_id} cannot be rebuilt from the capture: {refusal}")
    rebuilt = checked.graph
    training = any(s.recorded and s.name in ("aot_joint", "aot_backward") for s in stages)
    fragment = Fragment(rebuilt, [_input_from_meta(p, training, compile_id) for p in rebuilt["nodes"] if p["op"] == "placeholder"])
    backend_spec = {"name": backend, "options": None, "mode": None, "custom": False, "label": backend}
    case = Case(fragment, backend_spec, {}, training, compile_id, None)
    _note(case, checked.note())
    case.notes.append("inputs are random values of the recorded shapes (a capture keeps no tensor values)")
    return case, dumps


def _input_from_meta(node: dict[str, Any], training: bool, compile_id: str) -> dict[str, Any]:
    meta = node.get("tensor")
    if isinstance(meta, dict) and "shape" in meta:
        if not all(isinstance(d, int) for d in [*meta["shape"], *(meta.get("stride") or [])]):
            raise DynscopeError(f"compile {compile_id} was traced with dynamic shapes ({node['name']} has size "
                                f"{meta['shape']}); a capture keeps no values for them: run dynscope minify on the "
                                "script instead")
        # Parameters need gradients in a training graph; Dynamo names them ..._parameters_...
        wants_grad = training and "_parameters_" in node["name"] and str(meta.get("dtype", "")).startswith("float")
        return {"kind": "tensor", "shape": meta["shape"], "stride": meta.get("stride") or None,
                "dtype": meta.get("dtype", "float32"), "device": meta.get("device", "cpu"), "requires_grad": wants_grad}
    raise DynscopeError(f"compile {compile_id}: input {node['name']} is not a tensor of recorded shape; "
                        "run dynscope minify on the script instead")


def _why_no_graph(compile_: Any, stages: list[Any]) -> str:
    dynamo = next((s for s in stages if s.name == "dynamo"), None)
    if dynamo is not None and dynamo.missing_reason:
        return dynamo.missing_reason
    if compile_.status == "failed":
        return f"Dynamo failed before making one: {compile_.fail_type}"
    return "its structure was not recorded"


def _config_dumps(capture: Any, compile_id: str) -> dict[str, dict[str, Any]]:
    dumps: dict[str, dict[str, Any]] = {}
    events = capture.reader.events(["compilation_metrics"], compile_id=compile_id)
    metrics = events[-1].metadata.get("compilation_metrics", {}) if events else {}
    if not isinstance(metrics, dict):
        return dumps
    for field_name, module in (("inductor_config", "torch._inductor.config"), ("dynamo_config", "torch._dynamo.config")):
        try:
            value = json.loads(metrics.get(field_name) or "null")
        except (TypeError, ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            dumps[module] = value  # the worker keeps the non-defaults; replay_settings then decides
    return dumps
