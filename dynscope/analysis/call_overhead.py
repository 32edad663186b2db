"""What each call of a compiled entry point pays before its graph runs (``explain --profile``).

Dynamo's cache lookup checks the guards of the frame's cache entries, most recent first, until
one passes. The profiler replays that lookup on sampled calls (dynscope.probes.runtime): the
median of the samples is the per-call figure, next to the entry's measured time per call, the
number of guards of each compiled version and how many of them are Python lambda guards (the
slow kind: evaluated by the interpreter, not by the C++ guard manager).
"""

from __future__ import annotations

from dataclasses import dataclass

from dynscope.model import Capture, Compile
from dynscope.model.runtime import EntryTiming, RuntimeProfile

LAMBDA_GUARD = "LAMBDA_GUARD"


@dataclass(frozen=True)
class VersionGuards:
    compile_id: str
    guards: int | None  # None: no guard tree recorded and torch did not count them
    lambda_guards: int | None
    calls: int  # calls its graph served


@dataclass(frozen=True)
class CallOverhead:
    entry: EntryTiming
    lookup_per_call_s: float | None  # median of the replayed lookups
    lookup_samples: int
    per_call_s: float | None  # the entry's measured time per steady call
    versions: tuple[VersionGuards, ...]  # the entry frame's compiled versions

    @property
    def lookup_share(self) -> float | None:
        """Of a call's time, the share the cache lookup takes."""
        if self.lookup_per_call_s is None or not self.per_call_s:
            return None
        return self.lookup_per_call_s / self.per_call_s


def call_overheads(capture: Capture, compiles: list[Compile], profile: RuntimeProfile) -> list[CallOverhead]:
    """One per torch.compile'd entry point of a profiled run."""
    out = []
    for e in profile.entries:
        versions = tuple(_version_guards(capture, c, profile) for c in compiles if _is_entry_frame(e, c))
        out.append(CallOverhead(e, e.lookup_median_s, e.lookup_samples, e.per_call_s, versions))
    return out


def _is_entry_frame(e: EntryTiming, c: Compile) -> bool:
    return e.file == c.file and e.line == c.line and e.name.rsplit(".", 1)[-1] == c.function


def _version_guards(capture: Capture, c: Compile, profile: RuntimeProfile) -> VersionGuards:
    guards = capture.guards(c.compile_id)
    graph = profile.graph(c.compile_id)
    calls = graph.calls if graph is not None else 0
    if guards:
        return VersionGuards(c.compile_id, len(guards), sum(1 for g in guards if g.kind == LAMBDA_GUARD), calls)
    return VersionGuards(c.compile_id, c.guard_count, None, calls)


def call_overhead_json(overheads: list[CallOverhead]) -> list[dict[str, object]]:
    """The summary JSON's ``runtime.call_overhead`` (docs/summary-json.md)."""
    return [
        {"name": o.entry.name, "file": o.entry.file, "line": o.entry.line,
         "lookup_per_call_s": o.lookup_per_call_s, "lookup_samples": o.lookup_samples, "per_call_s": o.per_call_s,
         "lookup_share": o.lookup_share,
         "versions": [{"compile_id": v.compile_id, "guards": v.guards, "lambda_guards": v.lambda_guards, "calls": v.calls}
                      for v in o.versions]}
        for o in overheads
    ]


@dataclass(frozen=True)
class OverheadChange:
    """One entry point's per-call cache lookup in two runs (e.g. before and after a torch upgrade)."""

    name: str
    before_s: float
    after_s: float

    @property
    def change(self) -> float:
        return (self.after_s - self.before_s) / self.before_s if self.before_s > 0 else float("inf")


def overhead_changes(before: list[CallOverhead], after: list[CallOverhead]) -> list[OverheadChange]:
    """Entry points measured in both runs, matched by name and file name (runs may live in other
    directories)."""
    def key(o: CallOverhead) -> tuple[str, str | None]:
        return o.entry.name, (o.entry.file or "").rsplit("/", 1)[-1] or None

    earlier = {key(o): o for o in before if o.lookup_per_call_s is not None}
    out = []
    for o in after:
        b = earlier.get(key(o))
        if b is not None and b.lookup_per_call_s is not None and o.lookup_per_call_s is not None:
            out.append(OverheadChange(o.entry.name, b.lookup_per_call_s, o.lookup_per_call_s))
    return out
