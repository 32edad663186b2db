"""A run's records written by hand, read as ``dynscope fix`` reads a run: through the view's ranked,
typed problems (dynscope.analysis.problems.top_problems), then ``fix_problems``. No torch."""

from __future__ import annotations

from dataclasses import dataclass, field

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.problems import Problem, recompiles_by_frame, top_problems
from dynscope.analysis.runtime import CostedBreak, FrameRecompiles
from dynscope.model import CompileError, FixResult, Recompile, RecompileLimitHit, SkippedFrame


@dataclass(frozen=True)
class Occurrence:
    """One occurrence of a break, as much of it as the view reads."""

    compile_id: str | None = "0/0"
    consequence: str | None = None
    resumed_into: str | None = None
    user_stack: tuple[object, ...] = ()


@dataclass
class Stand:
    """The RunView properties the problems are derived from (an unprofiled run)."""

    errors: list[CompileError] = field(default_factory=list)
    recompile_limit_hits: list[RecompileLimitHit] = field(default_factory=list)
    break_groups: list[BreakGroup] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    skipped_frames: list[SkippedFrame] = field(default_factory=list)
    dynamic_sources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    compile_seconds: dict[str, float] = field(default_factory=dict)
    fix_results: list[FixResult] = field(default_factory=list)
    profiled: bool = False

    @property
    def costed_breaks(self) -> list[CostedBreak]:
        return [CostedBreak(g, None) for g in self.break_groups]

    @property
    def frame_recompiles(self) -> list[FrameRecompiles]:
        return [FrameRecompiles(rs, None) for rs in recompiles_by_frame(self.recompiles)]

    @property
    def problems(self) -> list[Problem]:
        return top_problems(self)
