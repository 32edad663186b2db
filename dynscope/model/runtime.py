"""The runtime profile of a run (``explain --profile``), as typed records.

The profiler (``dynscope.probes.runtime``) writes cumulative snapshots; the last one holds
the whole run. ``explain --vs-eager`` adds the same profile of an eager twin run.
Torch-free: this is what every view reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from dynscope.errors import CaptureError
from dynscope.events import EagerTwinRun, RuntimeSnapshot
from dynscope.model.json_values import JsonObject, JsonValue, as_str
from dynscope.store.reader import CaptureReader

PROFILE_EVENT = RuntimeSnapshot.KIND
EAGER_EVENT = EagerTwinRun.KIND


@dataclass(frozen=True)
class GraphTiming:
    """One compiled graph (one compile id): how often it ran and for how long."""

    compile_id: str
    file: str | None
    qualname: str | None
    device: str  # "cpu" | "cuda"
    calls: int
    seconds: float
    first_call_s: float | None = None  # the first call alone: it also pays for lazy work

    @property
    def steady_per_call_s(self) -> float | None:
        """Per call, leaving out the first (kernel loading, config benchmarking, CUDA-graph recording)."""
        if self.calls > 1 and self.first_call_s is not None:
            return (self.seconds - self.first_call_s) / (self.calls - 1)
        return self.seconds / self.calls if self.calls else None


@dataclass(frozen=True)
class GapTiming:
    """The time between the graph before a graph break and its resume graph."""

    resume_compile_id: str
    calls: int
    seconds: float
    unmeasured_calls: int  # calls with no graph before the break in its frame
    compiling_calls: int = 0  # calls during which Dynamo compiled (the resume function's first call)

    @property
    def measured_calls(self) -> int:
        return self.calls - self.unmeasured_calls - self.compiling_calls


@dataclass(frozen=True)
class EntryTiming:
    """One torch.compile'd function or module, timed per call."""

    name: str
    file: str | None
    line: int | None
    kind: str  # "module" | "function"
    device: str
    calls: int
    seconds: float  # calls that did not compile
    compiling_calls: int  # calls during which Dynamo compiled (wall time, in compiling_seconds)
    compiling_seconds: float
    # Dynamo's cache lookup (guard checks) per call, measured by replaying it on sampled calls:
    # the median and mean of the samples (None: not measured, e.g. an older capture or torch)
    lookup_samples: int = 0
    lookup_median_s: float | None = None
    lookup_mean_s: float | None = None

    @property
    def steady_calls(self) -> int:
        return self.calls - self.compiling_calls

    @property
    def per_call_s(self) -> float | None:
        return self.seconds / self.steady_calls if self.steady_calls > 0 else None

    @property
    def key(self) -> tuple[str, str | None, int | None]:
        return self.name, self.file, self.line


@dataclass(frozen=True)
class CudagraphCounts:
    """``mode="reduce-overhead"``: what CUDA-graph trees did with one compile's graph."""

    compile_id: str
    warmups: int  # runs in eager before recording
    recordings: int
    replays: int


@dataclass(frozen=True)
class EagerTwin:
    """``--vs-eager``: the same program run again with compilation off."""

    exit_code: int
    elapsed_s: float
    entries: tuple[EntryTiming, ...]  # empty when the twin recorded no profile
    output_tail: str


@dataclass(frozen=True)
class RuntimeProfile:
    method: str  # "perf_counter" | "cuda_events"
    wall_s: float  # from the profiler's start to its last snapshot
    complete: bool  # the final snapshot (False: the run was cut short; the last periodic one)
    graphs: tuple[GraphTiming, ...]
    gaps: tuple[GapTiming, ...]
    entries: tuple[EntryTiming, ...]
    eager: EagerTwin | None
    cudagraphs: tuple[CudagraphCounts, ...] = ()

    def graph(self, compile_id: str) -> GraphTiming | None:
        return next((g for g in self.graphs if g.compile_id == compile_id), None)

    def gap(self, resume_compile_id: str) -> GapTiming | None:
        return next((g for g in self.gaps if g.resume_compile_id == resume_compile_id), None)


def last_snapshot(reader: CaptureReader, name: str = PROFILE_EVENT) -> JsonObject | None:
    return reader.last_json_object(name)


def read_profile(reader: CaptureReader) -> RuntimeProfile | None:
    """The run's profile, or None when it was not profiled. Malformed snapshots are refused."""
    events = reader.events([PROFILE_EVENT])
    if not events:
        return None
    last = events[-1]
    raw = reader.json_payload(last.payload_hash)
    if not isinstance(raw, dict):
        raise CaptureError("the runtime profile in this capture is not a JSON object")
    try:
        return RuntimeProfile(
            method=str(raw.get("method") or "perf_counter"),
            wall_s=_float(raw.get("wall_s") or 0.0),
            complete=RuntimeSnapshot.parse(last.metadata).final,
            graphs=tuple(GraphTiming(str(g["compile_id"]), as_str(g.get("file")), as_str(g.get("qualname")),
                                     str(g.get("device", "cpu")), _int(g["calls"]), _float(g["seconds"]),
                                     _float_or_none(g.get("first_call_seconds")))
                         for g in _objects(raw.get("graphs", []))),
            gaps=tuple(GapTiming(str(b["resume_compile_id"]), _int(b["calls"]), _float(b["seconds"]),
                                 _int(b.get("unmeasured_calls", 0)), _int(b.get("compiling_calls", 0)))
                       for b in _objects(raw.get("breaks", []))),
            entries=_entries(raw.get("entries", [])),
            eager=_eager_twin(reader),
            cudagraphs=tuple(CudagraphCounts(str(c["compile_id"]), _int(c.get("warmups", 0)), _int(c.get("recordings", 0)),
                                             _int(c.get("replays", 0))) for c in _objects(raw.get("cudagraphs", []))),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise CaptureError(f"the runtime profile in this capture is malformed ({type(e).__name__}: {e})") from None


# The profile is untrusted JSON: a value of the wrong type is a TypeError (or, for text that is
# not a number, int()'s ValueError), which read_profile turns into one "malformed" error.

def _objects(value: JsonValue) -> list[JsonObject]:
    """The objects of a JSON array (text and objects iterate as Python does, so an empty one is no items)."""
    if not isinstance(value, list | str | dict):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    items: list[JsonValue] = list(value)
    objects = [item for item in items if isinstance(item, dict)]
    if len(objects) != len(items):
        raise TypeError("expected a list of objects")
    return objects


def _int(value: JsonValue) -> int:
    """int() as the profiler's numbers take it (a number or numeric text)."""
    if isinstance(value, bool | int | float | str):
        return int(value)
    raise TypeError(f"expected a number, got {type(value).__name__}")


def _float(value: JsonValue) -> float:
    if isinstance(value, bool | int | float | str):
        return float(value)
    raise TypeError(f"expected a number, got {type(value).__name__}")


def _float_or_none(value: JsonValue) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int_or_none(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _entries(raw: JsonValue) -> tuple[EntryTiming, ...]:
    return tuple(
        EntryTiming(str(e["name"]), as_str(e.get("file")), _int_or_none(e.get("line")), str(e.get("kind", "function")),
                    str(e.get("device", "cpu")), _int(e["calls"]), _float(e["seconds"]),
                    _int(e.get("compiling_calls", 0)), _float(e.get("compiling_seconds", 0.0)),
                    _int(e.get("lookup_samples", 0)), _float_or_none(e.get("lookup_median_s")),
                    _float_or_none(e.get("lookup_mean_s")))
        for e in _objects(raw)
    )


def _eager_twin(reader: CaptureReader) -> EagerTwin | None:
    events = reader.events([EAGER_EVENT])
    if not events:
        return None
    event = events[-1]
    raw = reader.json_payload(event.payload_hash)
    twin = EagerTwinRun.parse(event.metadata)  # NotUnderstood is a ValueError: the profile is refused
    return EagerTwin(
        exit_code=twin.exit_code,
        elapsed_s=twin.elapsed_s,
        entries=_entries(raw.get("entries", [])) if isinstance(raw, dict) else (),
        output_tail=twin.output_tail,
    )
