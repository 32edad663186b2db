"""What ``dynscope fix`` reads back from a trial run's capture (records: dynscope.events Fix*).

In a trial's capture (written by dynscope/fix/apply.py inside the run): the remedy features of
this torch, which remedies took effect, the callables given to torch.compile, and each compiled
call's outputs. The verified fixes recorded into the program's capture are read by
``Capture.fix_results()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, TypeVar

from dynscope import events as contract
from dynscope.model.json_values import JsonObject, JsonValue, as_list, as_object
from dynscope.store.reader import Event

if TYPE_CHECKING:
    from dynscope.model.capture import Capture

R = TypeVar("R", bound=contract.Record)


class TrialOutput(TypedDict):
    """One compiled call's outputs in a trial run (the leaves as dynscope.fix.apply.describe_outputs wrote them)."""

    region: str
    call: int
    leaves: list[JsonValue]

ENV = "DYNSCOPE_FIX"  # the environment variable naming a trial's remedies (JSON)


def _records(capture: Capture, record: type[R]) -> list[tuple[R, Event]]:
    return capture.record_reader.records(record)


def trial_outputs(capture: Capture) -> list[TrialOutput]:
    """Each compiled call's outputs: {region, call, leaves}."""
    return [TrialOutput(region=record.region, call=record.call, leaves=as_list(capture.reader.json_payload(event.payload_hash)))
            for record, event in _records(capture, contract.FixOutput)]


def trial_features(capture: Capture) -> JsonObject:
    """What this torch offers the remedies (the first features record whose payload is an object)."""
    for _record, event in _records(capture, contract.FixFeatures):
        features = capture.reader.json_payload(event.payload_hash)
        if isinstance(features, dict):
            return as_object(features)
    return {}


def compiled_callables(capture: Capture) -> list[list[str]]:
    """[function, file] of each callable the program gave torch.compile (a module: its forward)."""
    return [[record.function, record.file or ""] for record, _ in _records(capture, contract.FixRegion)]


def applied_actions(capture: Capture) -> set[int]:
    return {record.index for record, _ in _records(capture, contract.FixApplied) if record.ok}


def program_seconds(capture: Capture) -> float | None:
    """From the program's start (the recorder ready) to its end (probes removed); None when the
    run ended before that was recorded."""
    starts = capture.reader.events([contract.RunStart.KIND])
    ends = capture.reader.events([contract.ProbesRemoved.KIND])
    if not starts or not ends:
        return None
    return max(0.0, ends[-1].ts - starts[0].ts)
