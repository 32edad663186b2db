"""Compile time, attributed: per compile and per frame, the phases torch timed (summing to the
compile's length, "other" included) and, where the graph's nodes carry their module stack, the
user modules that cost the most Inductor time.

The module split is an estimate: Inductor's time (passes, lowering, scheduling, code generation,
compilation, autotuning) is shared out by each module's share of the compute nodes in the graph
Inductor compiled (the post-grad graph), the backward compile by its share of the backward graph.
Nodes outside any module (graph glue) keep their share but are not listed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from dynscope.model import Capture, Compile
from dynscope.model.compile_phases import PHASE_LABELS, CompilePhases, PhaseName, sum_phases

MAX_MODULES = 5
_INDUCTOR_PHASES: frozenset[PhaseName] = frozenset({"inductor", "lowering", "scheduling", "codegen", "compile", "autotune"})
# (stage key of the graph Inductor compiled, the phases whose time its nodes share)
_GRAPHS: tuple[tuple[tuple[str, ...], frozenset[PhaseName]], ...] = (
    (("post_grad",), _INDUCTOR_PHASES),
    (("post_grad.backward",), frozenset({"backward"})),
)


@dataclass(frozen=True)
class ModuleCost:
    module: str  # the innermost module's path, as Dynamo named it ("self.conv")
    seconds: float  # estimated: Inductor time by node share
    nodes: int


@dataclass(frozen=True)
class CompileTime:
    compile_id: str
    function: str
    measured_s: float  # torch's compilation metrics: forward and backward compile
    phases: CompilePhases
    modules: tuple[ModuleCost, ...]

    @property
    def phase_sum_s(self) -> float:
        return self.phases.traced_s


@dataclass(frozen=True)
class FrameCompileTime:
    function: str
    file: str | None
    line: int | None
    compile_ids: tuple[str, ...]
    seconds: dict[PhaseName, float]  # by phase, over the frame's compiles
    modules: tuple[ModuleCost, ...]

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())


def measured_seconds(c: Compile) -> float:
    return (c.times.total or 0.0) + (c.times.backward or 0.0)


def compile_times(capture: Capture, compiles: list[Compile]) -> list[CompileTime]:
    """Every compile whose timed regions torch logged, in compile order."""
    phases = capture.compile_phases()
    return [CompileTime(c.compile_id, c.function, measured_seconds(c), phases[c.compile_id],
                        _module_costs(capture, c, phases[c.compile_id]))
            for c in compiles if c.compile_id in phases]


def frame_compile_times(times: list[CompileTime], compiles: list[Compile]) -> list[FrameCompileTime]:
    """Per compiled frame (code object), costliest first."""
    by_id = {c.compile_id: c for c in compiles}
    grouped: dict[object, list[CompileTime]] = {}
    for t in times:
        c = by_id[t.compile_id]
        grouped.setdefault(c.frame_id if c.frame_id is not None else c.compile_id, []).append(t)
    frames = []
    for ts in grouped.values():
        first = by_id[ts[0].compile_id]
        frames.append(FrameCompileTime(first.function, first.file, first.line, tuple(t.compile_id for t in ts),
                                       sum_phases(t.phases for t in ts), _merged_modules(ts)))
    return sorted(frames, key=lambda f: -f.total_s)


def phase_label(phase: PhaseName) -> str:
    return PHASE_LABELS[phase]


def _module_costs(capture: Capture, c: Compile, phases: CompilePhases) -> tuple[ModuleCost, ...]:
    costs: dict[str, float] = {}
    nodes: Counter[str] = Counter()
    stages = {s.key: s for s in capture.stages(c.compile_id) if s.recorded}
    for keys, shared in _GRAPHS:
        seconds = sum(phases.of(p) for p in shared)
        stage = next((stages[k] for k in keys if k in stages), None)
        if seconds <= 0.0 or stage is None:
            continue
        graph = capture.fx_graph(stage)
        if graph is None or not graph.compute_nodes:
            continue
        counts = Counter(_module_name(n.module_path) for n in graph.compute_nodes)
        total = sum(counts.values())
        for module, count in counts.items():
            if module is not None:
                costs[module] = costs.get(module, 0.0) + seconds * count / total
                nodes[module] += count
    ranked = sorted(costs, key=lambda m: -costs[m])[:MAX_MODULES]
    return tuple(ModuleCost(m, costs[m], nodes[m]) for m in ranked)


def _merged_modules(times: list[CompileTime]) -> tuple[ModuleCost, ...]:
    seconds: dict[str, float] = {}
    nodes: Counter[str] = Counter()
    for t in times:
        for m in t.modules:
            seconds[m.module] = seconds.get(m.module, 0.0) + m.seconds
            nodes[m.module] += m.nodes
    ranked = sorted(seconds, key=lambda m: -seconds[m])[:MAX_MODULES]
    return tuple(ModuleCost(m, seconds[m], nodes[m]) for m in ranked)


def _module_name(path: str | None) -> str | None:
    """Dynamo's source name of a module ("L['self'].conv") as the user wrote it ("self.conv")."""
    if not path:
        return None
    for prefix in ("L['self']", "L[\"self\"]"):
        if path.startswith(prefix):
            return "self" + path[len(prefix):]
    return path


def compile_time_json(times: list[CompileTime], frames: list[FrameCompileTime]) -> dict[str, object]:
    """The summary JSON's ``compile_phases`` field (docs/summary-json.md)."""
    return {
        "module_costs_are_estimates": True,
        "compiles": [
            {"compile_id": t.compile_id, "measured_s": round(t.measured_s, 6), "phase_sum_s": round(t.phase_sum_s, 6),
             "phases": {p: round(s, 6) for p, s in t.phases.seconds},
             "modules": [_module_json(m) for m in t.modules]}
            for t in times
        ],
        "frames": [
            {"function": f.function, "file": f.file, "line": f.line, "compile_ids": list(f.compile_ids),
             "total_s": round(f.total_s, 6), "phases": {p: round(s, 6) for p, s in f.seconds.items()},
             "modules": [_module_json(m) for m in f.modules]}
            for f in frames
        ],
    }


def _module_json(m: ModuleCost) -> dict[str, object]:
    return {"module": m.module, "seconds": round(m.seconds, 6), "nodes": m.nodes}
