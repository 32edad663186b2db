"""The headline numbers of a run (computed once per capture by dynscope.analysis.run_view)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dynscope.model import Compile
from dynscope.model.compile_phases import PHASE_LABELS, CompilePhases, PhaseName, sum_phases


@dataclass(frozen=True)
class Totals:
    frames: int
    compiles: int
    graphs: int  # compiles that produced a graph with at least one op
    graph_breaks: int
    distinct_graph_breaks: int
    recompiles: int
    errors: int
    compile_time_s: float  # forward and (lazily compiled) backward graphs together
    stage_times: dict[str, float] = field(default_factory=dict)  # seconds by stage, over all compiles
    skipped_frames: int = 0  # frames Dynamo gave up on (they ran in eager; not errors)
    recompile_limit_hits: int = 0
    # seconds by phase, in the words of `summary --compile-time` (compile_time_parts): what views show
    time_by_phase: tuple[tuple[str, float], ...] = ()


def compile_seconds(c: Compile) -> float:
    """A compile's whole cost: its frame's compile plus its backward graph's, when one was compiled."""
    return (c.times.total or 0.0) + (c.times.backward or 0.0)


def stage_seconds(compiles: list[Compile]) -> dict[str, float]:
    """Seconds per stage (dynamo, aot_autograd, inductor, codegen, backward), summed over compiles."""
    totals: dict[str, float] = {}
    for c in compiles:
        for name, seconds in c.times.by_stage().items():
            totals[name] = totals.get(name, 0.0) + seconds
    return totals


# torch's compilation-metrics stages (CompileTimes.by_stage) in the phases' own words: a stage that
# spans several phases is named by them all ("codegen" is code generation and C++/Triton compilation).
_STAGE_PHASES: dict[str, tuple[PhaseName, ...]] = {
    "dynamo": ("dynamo",),
    "aot_autograd": ("aot",),
    "inductor": ("inductor", "lowering", "scheduling"),
    "codegen": ("codegen", "compile"),
    "backward": ("backward",),
}


def stage_label(stage: str) -> str:
    """A compilation-metrics stage in `--compile-time`'s words ("code generation + C++/Triton compilation")."""
    phases = _STAGE_PHASES.get(stage)
    return stage if phases is None else " + ".join(PHASE_LABELS[p] for p in phases)


def compile_time_parts(compiles: list[Compile], phases: Mapping[str, CompilePhases]) -> tuple[tuple[str, float], ...]:
    """Compile seconds by phase, named as `summary --compile-time` names them (PHASE_LABELS, the one
    vocabulary): torch's timed regions where it logged them for every compile, else its compilation
    metrics' stages in the same words."""
    timed = [phases[c.compile_id] for c in compiles if c.compile_id in phases]
    if compiles and len(timed) == len(compiles):
        return tuple((PHASE_LABELS[p], s) for p, s in sum_phases(timed).items())
    return tuple((stage_label(name), s) for name, s in stage_seconds(compiles).items())


def parts_text(parts: tuple[tuple[str, float], ...], unit: str = " s") -> str:
    """'Dynamo tracing 0.61 s · code generation 6.02 s · ...'."""
    return " · ".join(f"{name} {seconds:.2f}{unit}" for name, seconds in parts)


def not_understood_line(found: dict[str, tuple[int, str]]) -> str | None:
    """'3 events not understood: dynscope:graph_break ×2 (user_stack: expected tuple, got str), ...'."""
    if not found:
        return None
    count = sum(n for n, _ in found.values())
    kinds = ", ".join(f"{kind} ×{n} ({why})" for kind, (n, why) in found.items())
    return f"{count} event{'s' if count != 1 else ''} not understood: {kinds}"
