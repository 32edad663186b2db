"""What the measured runtime says: what each graph break, recompile and compiled frame cost,
where the run's time went, and whether compiling paid off (pure functions of the model).

A graph break's cost is the time measured between the graph before it and the first graph
after it in the same function (see ``dynscope.probes.runtime``). When the resume function
right after a break has no graph of its own (it breaks again at once), that time is
counted at the next break, where the first graph after it resumes: the earlier break
then has no cost of its own (None), never a made-up one.

Each of these is computed once per capture, by ``dynscope.analysis.run_view.RunView``; views
read the view's fields, not these functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.names import plural, seconds_text
from dynscope.analysis.overview import compile_seconds
from dynscope.model import Capture, Compile, Recompile
from dynscope.model.runtime import CudagraphCounts, EntryTiming, GapTiming, RuntimeProfile


@dataclass(frozen=True)
class Costing:
    """What one problem cost in a profiled run, and one line saying how."""

    cost_s: float | None  # None: not measured (detail says why)
    calls: int | None
    detail: str


@dataclass(frozen=True)
class VsEager:
    """One entry point compiled vs the same entry point in the eager twin run."""

    compiled_per_call_s: float | None
    eager_per_call_s: float | None
    speedup: float | None  # eager ÷ compiled per call
    compile_s: float  # what the calls that compiled took beyond a normal call
    break_even_calls: int | None  # calls after which compiling paid for itself; None: it never does
    comparable: bool
    why_not: str | None  # when not comparable


@dataclass(frozen=True)
class FrameRuntime:
    """One compiled version of a frame (one compile id)."""

    compile: Compile
    calls: int
    compiled_s: float
    first_call_s: float | None  # the first call alone (lazy kernel loading, benchmarking, CUDA-graph recording)
    steady_per_call_s: float | None  # per call after the first
    guard_s: float | None  # torch's guard latency × calls (None: torch did not measure it)
    share_of_frame_calls: float | None  # of all calls served by this frame's versions
    vs_eager: VsEager | None


@dataclass(frozen=True)
class TimeSplit:
    """Where the profiled run's time went."""

    wall_s: float
    compiled_s: float  # inside compiled graphs
    eager_between_graphs_s: float  # at graph breaks, between a graph and its resume graph
    guard_s: float  # guard checks (torch's measured latency × calls)
    compile_s: float  # compiling (every compile's total, backward included)

    @property
    def rest_s(self) -> float:
        return max(0.0, self.wall_s - self.compiled_s - self.eager_between_graphs_s - self.guard_s - self.compile_s)

    def parts(self) -> list[tuple[str, float]]:
        """(label, seconds) in the order every view lists them."""
        return [("inside compiled graphs", self.compiled_s), ("eager code at graph breaks", self.eager_between_graphs_s),
                ("guard checks (torch's guard latency × calls)", self.guard_s), ("compiling", self.compile_s),
                ("the rest of the program", self.rest_s)]


@dataclass(frozen=True)
class CostedBreak:
    """A break group and what it cost in the profiled run (costing None: the run was not profiled)."""

    group: BreakGroup
    costing: Costing | None


@dataclass(frozen=True)
class FrameRecompiles:
    """The recompiles of one frame (in the order met) and what they cost together (None: not profiled)."""

    recompiles: tuple[Recompile, ...]
    costing: Costing | None


@dataclass(frozen=True)
class RecompileRuntime:
    """One recompile's new version in the profiled run (both None: the run was not profiled)."""

    recompile: Recompile
    cost_s: float | None  # the version's compile time
    calls: int | None  # the calls the version served


@dataclass(frozen=True)
class EntryRuntime:
    """One torch.compile'd function or module, and how it compares with the eager twin run."""

    entry: EntryTiming
    vs_eager: VsEager | None  # None without a --vs-eager run


def break_costing(profile: RuntimeProfile, capture: Capture, group: BreakGroup) -> Costing:
    """What the group's breaks cost in the profiled run, and one line saying how."""
    cost = break_cost(profile, capture, group)
    calls = break_calls(profile, capture, group)
    resumes = resume_graphs(profile, capture, group)
    if cost is None:
        detail = ("not measured separately: the code after it breaks again before any graph runs, so its "
                  "time is counted at the next break" if not resumes and resumed(capture, group)
                  else "not measured: no compiled graph ran before it in its frame")
        return Costing(None, calls or None, detail)
    per_call = f", {seconds_text(cost / calls)} a call" if calls else ""
    return Costing(cost, calls, f"costs {seconds_text(cost)} over {plural(calls, 'call')}{per_call}: eager code "
                                f"from the graph before the break to graph {', '.join(resumes)} where it resumes")


def recompile_costing(profile: RuntimeProfile, capture: Capture, recompiles: tuple[Recompile, ...]) -> Costing | None:
    """Recompiles of one frame: the compile time they took, and the calls each version served."""
    if not recompiles:
        return None
    first = recompiles[0]
    recompiled = {r.compile_id for r in recompiles}
    versions = {c.compile_id: version_calls(profile, c.compile_id) for c in capture.compiles()
                if (c.function, c.file, c.line) == (first.function, first.file, first.line)}
    frame_calls = sum(versions.values())
    served = sum(n for cid, n in versions.items() if cid in recompiled)
    cost = recompile_cost(capture, recompiles)
    detail = f"recompiling took {seconds_text(cost)}"
    if frame_calls:
        busiest = max(versions, key=versions.__getitem__)
        detail += (f"; version {busiest} served {versions[busiest] / frame_calls:.0%} of {plural(frame_calls, 'call')}"
                   f", the recompiled versions {served}")
    return Costing(cost, served, detail)


def most_costly_first(costed: list[CostedBreak]) -> list[CostedBreak]:
    """Costed break groups, most costly first; those not measured last, in the order given."""
    return sorted(costed, key=lambda c: (c.costing is None or c.costing.cost_s is None,
                                         -(c.costing.cost_s or 0.0) if c.costing is not None else 0.0))


def break_cost(profile: RuntimeProfile, capture: Capture, group: BreakGroup) -> float | None:
    """Seconds the group's breaks cost over the run; None when none of them could be timed.

    A call whose gap included compiling the resume function (its first) is counted at the
    average of the measured calls: its own gap is compile time, which is counted as such."""
    total = 0.0
    measured = False
    for gap in _gaps(profile, capture, group):
        if gap.measured_calls > 0:
            measured = True
            total += gap.seconds / gap.measured_calls * (gap.measured_calls + gap.compiling_calls)
    return total if measured else None


def break_calls(profile: RuntimeProfile, capture: Capture, group: BreakGroup) -> int:
    """Calls through the group's breaks that a cost covers."""
    return sum(g.measured_calls + g.compiling_calls for g in _gaps(profile, capture, group) if g.measured_calls)


def _gaps(profile: RuntimeProfile, capture: Capture, group: BreakGroup) -> list[GapTiming]:
    gaps = [profile.gap(cid) for cid in _resume_compile_ids(capture, group)]
    return [g for g in gaps if g is not None]


def resume_graphs(profile: RuntimeProfile, capture: Capture, group: BreakGroup) -> list[str]:
    """Compile ids of the resume graphs that ran after the group's breaks."""
    return [cid for cid in _resume_compile_ids(capture, group) if profile.gap(cid) is not None]


def resumed(capture: Capture, group: BreakGroup) -> bool:
    """Whether Dynamo compiled a resume function after any of the group's breaks."""
    return bool(_resume_compile_ids(capture, group))


def _resume_compile_ids(capture: Capture, group: BreakGroup) -> list[str]:
    """Compile ids of the resume functions the group's breaks continue in (each once)."""
    wanted = set()
    for b in group.occurrences:
        if not b.resumed_into or b.compile_id is None:
            continue
        try:
            file = capture.compile(b.compile_id).file
        except Exception:
            continue
        wanted.add((b.resumed_into, file))
    return [c.compile_id for c in capture.compiles() if (c.function, c.file) in wanted]


def recompile_cost(capture: Capture, recompiles: Iterable[Recompile]) -> float:
    """What recompiling cost: the compile time of each new version."""
    return sum(compile_seconds(capture.compile(r.compile_id)) for r in recompiles)


def version_calls(profile: RuntimeProfile, compile_id: str) -> int:
    graph = profile.graph(compile_id)
    return graph.calls if graph is not None else 0


def entry_runtimes(profile: RuntimeProfile) -> list[EntryRuntime]:
    """Every torch.compile'd entry point, each against its eager twin when there is one."""
    return [EntryRuntime(e, vs_eager(e, profile)) for e in profile.entries]


def frame_runtimes(compiles: list[Compile], profile: RuntimeProfile, entries: list[EntryRuntime]) -> list[FrameRuntime]:
    """Every compiled version that ran, in compile order."""
    by_id = {c.compile_id: c for c in compiles}
    by_frame: dict[int | None, int] = {}
    for g in profile.graphs:
        c = by_id.get(g.compile_id)
        if c is not None:
            by_frame[c.frame_id] = by_frame.get(c.frame_id, 0) + g.calls
    out = []
    for c in by_id.values():
        timing = profile.graph(c.compile_id)
        if timing is None:
            continue
        frame_calls = by_frame.get(c.frame_id, 0)
        out.append(FrameRuntime(
            compile=c,
            calls=timing.calls,
            compiled_s=timing.seconds,
            first_call_s=timing.first_call_s,
            steady_per_call_s=timing.steady_per_call_s,
            guard_s=c.guard_latency_s * timing.calls if c.guard_latency_s is not None else None,
            share_of_frame_calls=timing.calls / frame_calls if frame_calls else None,
            vs_eager=_entry_comparison(c, entries),
        ))
    return out


def _entry_comparison(c: Compile, entries: list[EntryRuntime]) -> VsEager | None:
    """The entry point whose function this compile is (only top-level frames have one)."""
    for e in entries:
        timing = e.entry
        if timing.file == c.file and timing.line == c.line and timing.name.rsplit(".", 1)[-1] == c.function:
            return e.vs_eager
    return None


def time_split(profile: RuntimeProfile, frames: list[FrameRuntime], compile_s: float) -> TimeSplit:
    """``frames``: frame_runtimes of the run; ``compile_s``: every compile's total, backward included."""
    return TimeSplit(
        wall_s=profile.wall_s,
        compiled_s=sum(g.seconds for g in profile.graphs),
        eager_between_graphs_s=sum(g.seconds / g.measured_calls * (g.measured_calls + g.compiling_calls)
                                   for g in profile.gaps if g.measured_calls > 0),
        guard_s=sum(f.guard_s or 0.0 for f in frames),
        compile_s=compile_s,
    )


def vs_eager(entry: EntryTiming, profile: RuntimeProfile) -> VsEager | None:
    """The entry point against its eager twin; None without a --vs-eager run."""
    twin = profile.eager
    if twin is None:
        return None
    eager = next((e for e in twin.entries if e.key == entry.key), None)
    compiled_per_call = entry.per_call_s
    why_not = _not_comparable(entry, eager, twin.exit_code)
    if eager is None or compiled_per_call is None:
        return VsEager(compiled_per_call, None, None, 0.0, None, False, why_not)
    eager_per_call = (eager.seconds + eager.compiling_seconds) / eager.calls if eager.calls else None
    if eager_per_call is None:
        return VsEager(compiled_per_call, None, None, 0.0, None, False, why_not)
    compile_s = max(0.0, entry.compiling_seconds - entry.compiling_calls * compiled_per_call)
    saved = eager_per_call - compiled_per_call
    return VsEager(
        compiled_per_call_s=compiled_per_call,
        eager_per_call_s=eager_per_call,
        speedup=eager_per_call / compiled_per_call if compiled_per_call > 0 else None,
        compile_s=compile_s,
        break_even_calls=math.ceil(compile_s / saved) if saved > 0 else None,
        comparable=why_not is None,
        why_not=why_not,
    )


def _not_comparable(entry: EntryTiming, eager: EntryTiming | None, eager_exit: int) -> str | None:
    if eager is None:
        return f"{entry.name} never ran in the eager run"
    if eager.calls != entry.calls:
        return (f"{entry.name} ran {entry.calls} call{'s' * (entry.calls != 1)} compiled and "
                f"{eager.calls} in eager: the program did different work")
    if entry.steady_calls == 0:
        return f"every call of {entry.name} compiled: no steady-state call to compare"
    if eager_exit != 0:
        return f"the eager run exited with status {eager_exit}"
    return None


def run_vs_eager(profile: RuntimeProfile, entries: list[EntryRuntime]) -> VsEager | None:
    """All entry points together: total compiled vs eager time per step of the whole set."""
    if profile.eager is None:
        return None
    usable = [(e.entry, e.vs_eager) for e in entries if e.vs_eager is not None and e.vs_eager.comparable]
    why_not = next((e.vs_eager.why_not for e in entries if e.vs_eager is not None and not e.vs_eager.comparable), None)
    if not usable:
        return VsEager(None, None, None, 0.0, None, False,
                       why_not or "no torch.compile'd function or module ran in both runs")
    # a comparable VsEager has both per-call times (vs_eager makes it so)
    compiled = sum((v.compiled_per_call_s or 0.0) * e.calls for e, v in usable)
    eager = sum((v.eager_per_call_s or 0.0) * e.calls for e, v in usable)
    compile_s = sum(v.compile_s for _, v in usable)
    steps = max(e.calls for e, _ in usable)
    saved_per_step = (eager - compiled) / steps
    return VsEager(
        compiled_per_call_s=compiled / steps,
        eager_per_call_s=eager / steps,
        speedup=eager / compiled if compiled > 0 else None,
        compile_s=compile_s,
        break_even_calls=math.ceil(compile_s / saved_per_step) if saved_per_step > 0 else None,
        comparable=why_not is None,
        why_not=why_not,
    )


def cudagraph_line(counts: CudagraphCounts) -> str:
    """'CUDA graphs: 1 warm-up, 1 recording, 48 replays' (mode="reduce-overhead")."""
    return (f"CUDA graphs: {plural(counts.warmups, 'warm-up run')}, {plural(counts.recordings, 'recording')}, "
            f"{plural(counts.replays, 'replay')}")
