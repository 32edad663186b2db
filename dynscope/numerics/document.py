"""The JSON document of ``dynscope numerics --json`` (schema ``dynscope.numerics/1``, described in
docs/numerics-json.md), built from the recorded ``NumericsChecked`` event. No torch."""

from __future__ import annotations

import dataclasses
from typing import Any

from dynscope.events import NumericsChecked, NumericsNode
from dynscope.numerics.criterion import NONFINITE_ERROR, exit_status

SCHEMA = "dynscope.numerics/1"
# A frame's edit-identity fields (events.BreakFrame: what compare matches breaks by) are not part
# of dynscope.numerics/1: a suspect is placed by its file and line.
_IDENTITY_FIELDS = frozenset({"qualname", "statement", "above", "below"})


def node_json(node: NumericsNode) -> dict[str, Any]:
    data = dataclasses.asdict(node)
    data["stack"] = [{k: v for k, v in dataclasses.asdict(f).items() if k not in _IDENTITY_FIELDS}
                     for f in node.stack]
    for key in ("eager_error", "compiled_error"):  # JSON has no NaN/Infinity: null says "non-finite"
        data[key] = None if data[key] >= NONFINITE_ERROR else data[key]
    return data


def document(record: NumericsChecked, *, capture: str) -> dict[str, Any]:
    suspect = record.nodes[record.first_suspect] if record.first_suspect is not None and \
        0 <= record.first_suspect < len(record.nodes) else None
    return {
        "schema": SCHEMA,
        "capture": capture,
        "verdict": record.verdict,
        "exit_status": exit_status(record.verdict),
        "criterion": {"text": record.criterion, "factor": record.factor, "tolerance": record.tolerance},
        "program_dtype": record.program_dtype,
        "reference_dtype": record.reference_dtype,
        "graphs_checked": record.graphs_checked,
        "nodes_compared": len(record.nodes),
        "not_compared": record.not_compared,
        "suspects": sum(1 for n in record.nodes if n.suspect),
        "nondeterministic": sum(1 for n in record.nodes if n.nondeterministic),
        "first_suspect": None if suspect is None else node_json(suspect),
        "nodes": [node_json(n) for n in record.nodes],
        "elapsed_s": record.elapsed_s,
        "notes": list(record.notes),
    }
