"""The prepared view of one run: what every view of a capture shows about the run as a whole,
derived once.

The terminal summary, the TUI, the HTML / Markdown / JSON reports, ``check`` and ``compare``
all read break groups, recompiles, errors, skipped frames, recompile-limit hits, totals and
the ranked problems from ``run_view(capture)`` instead of deriving them again each. Each fact
is computed the first time a view asks for it (a TUI overview of a thousand-compile capture
reads only what it shows) and then kept for every other view of the same capture.
"""

from __future__ import annotations

import weakref
from functools import cached_property

from dynscope.analysis.breaks import BreakGroup, group_breaks
from dynscope.analysis.overview import Totals, compile_seconds, stage_seconds
from dynscope.analysis.problems import Problem, top_problems
from dynscope.model import (
    Capture,
    Compile,
    CompileError,
    FixResult,
    Frame,
    MinifyResult,
    Recompile,
    RecompileLimitHit,
    Run,
    SkippedFrame,
)


class RunView:
    def __init__(self, capture: Capture) -> None:
        self.capture = capture

    @property
    def run(self) -> Run:
        return self.capture.run

    @cached_property
    def compiles(self) -> list[Compile]:
        return self.capture.compiles()

    @cached_property
    def frames(self) -> list[Frame]:
        return self.capture.frames()

    @cached_property
    def break_groups(self) -> list[BreakGroup]:
        """Distinct graph breaks, most frequent first (dynscope.analysis.breaks)."""
        return group_breaks(self.capture.graph_breaks())

    @cached_property
    def recompiles(self) -> list[Recompile]:
        return self.capture.recompiles()

    @cached_property
    def errors(self) -> list[CompileError]:
        return self.capture.errors()

    @cached_property
    def skipped_frames(self) -> list[SkippedFrame]:
        return self.capture.skipped_frames()

    @cached_property
    def recompile_limit_hits(self) -> list[RecompileLimitHit]:
        return self.capture.recompile_limit_hits()

    @cached_property
    def minify_results(self) -> list[MinifyResult]:
        return self.capture.minify_results()

    @cached_property
    def fix_results(self) -> list[FixResult]:
        """The remedies `dynscope fix` proved for this run's problems."""
        return self.capture.fix_results()

    @cached_property
    def dynamic_sources(self) -> dict[str, tuple[str, ...]]:
        return self.capture.dynamic_sources()

    @cached_property
    def compile_seconds(self) -> dict[str, float]:
        """Each compile's whole cost (its backward graph's included), by compile id."""
        return {c.compile_id: compile_seconds(c) for c in self.compiles}

    @cached_property
    def totals(self) -> Totals:
        return Totals(
            frames=len(self.frames),
            compiles=len(self.compiles),
            graphs=sum(1 for c in self.compiles if c.graph_op_count),
            graph_breaks=sum(g.count for g in self.break_groups),
            distinct_graph_breaks=len(self.break_groups),
            recompiles=len(self.recompiles),
            errors=len(self.errors),
            compile_time_s=sum(self.compile_seconds.values()),
            stage_times=stage_seconds(self.compiles),
            skipped_frames=len(self.skipped_frames),
            recompile_limit_hits=len(self.recompile_limit_hits),
        )

    @cached_property
    def problems(self) -> list[Problem]:
        """What went wrong, most harmful first (dynscope.analysis.problems)."""
        return top_problems(self)

    @cached_property
    def not_understood(self) -> dict[str, tuple[int, str]]:
        """Events the model could not read, per kind: (count, why the first was not understood)."""
        return self.capture.not_understood()


_VIEWS: weakref.WeakKeyDictionary[Capture, RunView] = weakref.WeakKeyDictionary()


def run_view(capture: Capture) -> RunView:
    """The one prepared view of this capture (made on first use, then shared by every view)."""
    view = _VIEWS.get(capture)
    if view is None:
        view = _VIEWS[capture] = RunView(capture)
    return view
