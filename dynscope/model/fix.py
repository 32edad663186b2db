"""What ``dynscope fix`` reads back from a trial run's capture (records: dynscope.events Fix*).

In a trial's capture (written by dynscope/fix/apply.py inside the run): the remedy features of
this torch, which remedies took effect, the callables given to torch.compile, and each compiled
call's outputs. The verified fixes recorded into the program's capture are read by
``Capture.fix_results()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from dynscope import events as contract

if TYPE_CHECKING:
    from dynscope.model.capture import Capture
    from dynscope.store.reader import Event

R = TypeVar("R", bound=contract.Record)

# Functions and sets the remedies call, recorded as present (True) or not by probes.compat.remedy_features;
# every other name it records is a torch._dynamo.config setting and its current value.
FEATURE_FUNCTIONS = frozenset({"reorderable_logging_functions", "mark_dynamic", "maybe_mark_dynamic",
                               "compiler_disable", "torch_check", "nonstrict_trace", "leaf_function",
                               "custom_op"})
# the escape hatches among them (dynscope/rewrites/hatches.py and numpy_ops.py write them)
HATCH_FEATURES = ("nonstrict_trace", "leaf_function", "custom_op")

@dataclass(frozen=True)
class Features:
    """What this torch offers the remedies (analysis/remedies.py chooses among them)."""

    configs: Mapping[str, contract.JsonValue] = field(default_factory=dict)  # config name -> value now
    functions: frozenset[str] = frozenset()  # those of FEATURE_FUNCTIONS this torch has
    compiled_callables: tuple[tuple[str, str], ...] = ()  # (function, file) given to torch.compile
    program_root: str | None = None  # the program's directory (set by fix, not recorded)
    # (file, first line) of each callable given to torch.compile, where the capture recorded it: tells
    # Net.forward from Masking.forward in one file
    compiled_lines: tuple[tuple[str, int], ...] = ()

    def has(self, function: str) -> bool:
        return function in self.functions

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Features:
        """The child's record (probes.compat.remedy_features), with ``compiled_callables`` when present."""
        callables = data.get("compiled_callables")
        configs: dict[str, contract.JsonValue] = {}
        for name, value in data.items():
            if name in FEATURE_FUNCTIONS or name in ("compiled_callables", "program_root"):
                continue
            try:
                configs[name] = contract._json_value(value, name)
            except ValueError:
                configs[name] = str(value)  # recorded with default=str already; kept comparable
        root = data.get("program_root")
        return cls(configs, frozenset(name for name in FEATURE_FUNCTIONS if data.get(name) is True),
                   tuple((str(c[0]), str(c[1] or "")) for c in callables if isinstance(c, list) and len(c) == 2)
                   if isinstance(callables, list) else (),
                   root if isinstance(root, str) else None)


def _records(capture: Capture, record: type[R]) -> list[tuple[R, Event]]:
    return capture.record_reader.records(record)


def trial_outputs(capture: Capture) -> list[contract.CallOutputs]:
    """Each compiled call's outputs, in the order recorded."""
    out = []
    for record, event in _records(capture, contract.FixOutput):
        leaves = capture.reader.json_payload(event.payload_hash)
        out.append(contract.CallOutputs(record.region, record.call,
                                        tuple(contract.OutputLeaf.from_json(x) for x in leaves)
                                        if isinstance(leaves, list) else ()))
    return out


def trial_features(capture: Capture) -> Features:
    """What the trial's torch offers, and the callables the program gave torch.compile."""
    recorded: Mapping[str, object] = {}
    for _record, event in _records(capture, contract.FixFeatures):
        payload = capture.reader.json_payload(event.payload_hash)
        if isinstance(payload, dict):
            recorded = payload
            break
    regions = [record for record, _ in _records(capture, contract.FixRegion)]
    features = Features.from_json({**recorded, "compiled_callables": [[r.function, r.file or ""] for r in regions]})
    lines = tuple((r.file, r.line) for r in regions if r.file and r.line is not None)
    return replace(features, compiled_lines=lines) if lines else features


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
    return float(max(0.0, ends[-1].ts - starts[0].ts))
