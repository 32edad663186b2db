"""What ``dynscope fix`` reads back from a trial run's capture (records: dynscope.events Fix*).

In a trial's capture (written by dynscope/fix/apply.py inside the run): the remedy features of
this torch, which remedies took effect, the callables given to torch.compile, and each compiled
call's outputs. The verified fixes recorded into the program's capture are read by
``Capture.fix_results()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dynscope import events as contract

if TYPE_CHECKING:
    from dynscope.model.capture import Capture

def _records(capture: Capture, record: type[contract.Record]):
    for event in capture.reader.events([record.KIND]):
        parsed = capture._parse(record, event)
        if parsed is not None:
            yield parsed, event


def trial_outputs(capture: Capture) -> list[dict[str, Any]]:
    """Each compiled call's outputs: {region, call, leaves}."""
    out = []
    for record, event in _records(capture, contract.FixOutput):
        leaves = capture.reader.json_payload(event.payload_hash)
        out.append({"region": record.region, "call": record.call, "leaves": leaves if isinstance(leaves, list) else []})
    return out


def trial_features(capture: Capture) -> dict[str, Any]:
    for _record, event in _records(capture, contract.FixFeatures):
        features = capture.reader.json_payload(event.payload_hash)
        if isinstance(features, dict):
            return features
    return {}


def compiled_callables(capture: Capture) -> list[list[str]]:
    """[function, file] of each callable the program gave torch.compile (a module: its forward)."""
    return [[record.function, record.file or ""] for record, _ in _records(capture, contract.FixRegion)]


def applied_actions(capture: Capture) -> set[int]:
    return {record.index for record, _ in _records(capture, contract.FixApplied) if record.ok}


def program_started_at(capture: Capture) -> float | None:
    """When the recorder was ready in the run (time.time()): the program starts right after."""
    starts = capture.reader.events([contract.RunStart.KIND])
    return starts[0].ts if starts else None


def program_seconds(capture: Capture) -> float | None:
    """From the program's start (the recorder ready) to its end (probes removed); None when the
    run ended before that was recorded."""
    starts = capture.reader.events([contract.RunStart.KIND])
    ends = capture.reader.events([contract.ProbesRemoved.KIND])
    if not starts or not ends:
        return None
    return max(0.0, ends[-1].ts - starts[0].ts)
