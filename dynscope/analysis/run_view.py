"""The prepared view of one run: what every view of a capture shows about the run as a whole,
derived once.

The terminal summary, the TUI, the HTML / Markdown / JSON reports, ``check`` and ``compare``
all read break groups, recompiles, errors, skipped frames, recompile-limit hits, totals, the
ranked problems and, for a profiled run, its runtime (where the time went, compiled vs eager,
what each break group and each frame's recompiles cost) from ``run_view(capture)`` instead of
deriving them again each. Each fact is computed the first time a view asks for it (a TUI
overview of a thousand-compile capture reads only what it shows) and then kept for every
other view of the same capture.
"""

from __future__ import annotations

import weakref
from functools import cached_property

from dynscope.analysis import runtime
from dynscope.analysis.alerts import RunAlert, run_alerts
from dynscope.analysis.breaks import BreakGroup, group_breaks
from dynscope.analysis.caches import CacheReport, cache_report
from dynscope.analysis.call_overhead import CallOverhead, call_overheads
from dynscope.analysis.compile_time import CompileTime, FrameCompileTime, compile_times, frame_compile_times
from dynscope.analysis.numerics import NumericsView, numerics_view
from dynscope.analysis.overview import Totals, compile_seconds, compile_time_parts, stage_seconds
from dynscope.analysis.problems import Problem, recompiles_by_frame, top_problems
from dynscope.analysis.runtime import CostedBreak, EntryRuntime, FrameRecompiles, FrameRuntime, RecompileRuntime, TimeSplit, VsEager
from dynscope.model import (
    Capture,
    Compile,
    CompileError,
    FixResult,
    Frame,
    MinifyResult,
    ProgramException,
    Recompile,
    RecompileLimitHit,
    Run,
    SkippedFrame,
)
from dynscope.model.compile_modes import AutotuneResult, CudagraphSkip
from dynscope.model.runtime import RuntimeProfile


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
    def numerics(self) -> NumericsView | None:
        """The run's numerics check (`dynscope numerics`): the error along each graph and its first suspect;
        None when the run was not checked."""
        return numerics_view(self.capture.numerics, self.compiles)

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
            time_by_phase=compile_time_parts(self.compiles, self.capture.compile_phases()),
            skipped_frames=len(self.skipped_frames),
            recompile_limit_hits=len(self.recompile_limit_hits),
        )

    @cached_property
    def compile_times(self) -> list[CompileTime]:
        """Each compile's seconds by phase and its costliest modules (dynscope.analysis.compile_time)."""
        return compile_times(self.capture, self.compiles)

    @cached_property
    def frame_compile_times(self) -> list[FrameCompileTime]:
        return frame_compile_times(self.compile_times, self.compiles)

    @cached_property
    def exception(self) -> ProgramException | None:
        """What the program raised, if it did."""
        return self.capture.exception

    @cached_property
    def recorded_stage_names(self) -> dict[str, list[str]]:
        """The names of the stages recorded, by compile id (Capture.recorded_stage_names)."""
        return {c.compile_id: self.capture.recorded_stage_names(c.compile_id) for c in self.compiles}

    @cached_property
    def cudagraph_skips(self) -> list[CudagraphSkip]:
        return self.capture.cudagraph_skips()

    @cached_property
    def caches(self) -> CacheReport:
        """Each cache layer of each compile, why a miss missed, and what a warm start saved."""
        return cache_report(self.capture)

    @cached_property
    def autotuning(self) -> list[AutotuneResult]:
        return self.capture.autotuning()

    # -- the runtime of a profiled run (``explain --profile``; dynscope.analysis.runtime) ----------

    @cached_property
    def profile(self) -> RuntimeProfile | None:
        """The measured runtime; None when the run was not profiled (then the fields below measure nothing: None,
        empty, or without costs)."""
        return self.capture.runtime

    @property
    def profiled(self) -> bool:
        return self.profile is not None

    @cached_property
    def call_overheads(self) -> list[CallOverhead]:
        """Per entry point: the cache lookup a call pays, its guards (dynscope.analysis.call_overhead)."""
        return [] if self.profile is None else call_overheads(self.capture, self.compiles, self.profile)

    @cached_property
    def costed_breaks(self) -> list[CostedBreak]:
        """Every break group, in break_groups' order, with what it cost (costing None: not profiled)."""
        profile = self.profile
        return [CostedBreak(g, None if profile is None else runtime.break_costing(profile, self.capture, g))
                for g in self.break_groups]

    @cached_property
    def breaks_by_cost(self) -> list[CostedBreak]:
        """The break groups as the views list them: most costly first when profiled, else most frequent first."""
        return runtime.most_costly_first(self.costed_breaks) if self.profiled else self.costed_breaks

    @cached_property
    def frame_recompiles(self) -> list[FrameRecompiles]:
        """The recompiles of each frame, with what they cost together (costing None: not profiled)."""
        profile = self.profile
        return [FrameRecompiles(rs, None if profile is None else runtime.recompile_costing(profile, self.capture, rs))
                for rs in recompiles_by_frame(self.recompiles)]

    @cached_property
    def recompile_runtimes(self) -> list[RecompileRuntime]:
        """Each recompile (in recompiles' order): its compile time and the calls its version served."""
        profile = self.profile
        if profile is None:
            return [RecompileRuntime(r, None, None) for r in self.recompiles]
        return [RecompileRuntime(r, runtime.recompile_cost(self.capture, [r]), runtime.version_calls(profile, r.compile_id))
                for r in self.recompiles]

    @cached_property
    def entry_runtimes(self) -> list[EntryRuntime]:
        """Each torch.compile'd entry point, against the eager twin run when there is one."""
        return [] if self.profile is None else runtime.entry_runtimes(self.profile)

    @cached_property
    def frame_runtimes(self) -> list[FrameRuntime]:
        """Every compiled version that ran, in compile order."""
        return [] if self.profile is None else runtime.frame_runtimes(self.compiles, self.profile, self.entry_runtimes)

    @cached_property
    def time_split(self) -> TimeSplit | None:
        """Where the profiled run's time went."""
        if self.profile is None:
            return None
        return runtime.time_split(self.profile, self.frame_runtimes, sum(compile_seconds(c) for c in self.compiles))

    @cached_property
    def vs_eager(self) -> VsEager | None:
        """All entry points together against the eager twin; None without a --vs-eager run."""
        return None if self.profile is None else runtime.run_vs_eager(self.profile, self.entry_runtimes)

    @cached_property
    def problems(self) -> list[Problem]:
        """What went wrong, most harmful first (dynscope.analysis.problems)."""
        return top_problems(self)

    @cached_property
    def alerts(self) -> list[RunAlert]:
        """What is wrong with the run beyond its compiles: a numerics suspect, compiled no faster than eager."""
        return run_alerts(self.numerics, self.vs_eager)

    @property
    def clean(self) -> bool:
        """Nothing to report: no compile problem and no alert. The one place every view asks."""
        return not self.problems and not self.alerts

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
