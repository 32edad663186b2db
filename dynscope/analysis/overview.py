"""The headline numbers of a run (computed once per capture by dynscope.analysis.run_view)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dynscope.model import Compile


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


def not_understood_line(found: dict[str, tuple[int, str]]) -> str | None:
    """'3 events not understood: dynscope:graph_break ×2 (user_stack: expected tuple, got str), ...'."""
    if not found:
        return None
    count = sum(n for n, _ in found.values())
    kinds = ", ".join(f"{kind} ×{n} ({why})" for kind, (n, why) in found.items())
    return f"{count} event{'s' if count != 1 else ''} not understood: {kinds}"
