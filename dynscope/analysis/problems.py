"""What went wrong in a run, ranked by impact: the first thing every view shows.

Ranking, most harmful first:
1. compile errors: the program died of it, or the backend failed and the frame gets no speed-up;
2. recompile-limit hits: the frame stopped being compiled: new inputs run in eager from then on;
3. skipped frames: Dynamo gave up on a frame (a graph break it could not handle, e.g. inside a
   loop) and ran it in eager; the program is unharmed, but that frame gets no speed-up;
4. graph breaks: every call of the frame runs split graphs with Python in between, so they
   cost on every step; more occurrences rank higher;
5. recompiles: a one-off compile cost per new guard value, until the recompile limit makes
   the frame run eagerly; more recompiles of a frame rank higher.
Within a kind, ties keep the order torch met the problems in, so a run always ranks the same way.

When the run was profiled (``explain --profile``), problems are ranked by what they cost in
seconds instead: compile errors stay first (they change what the program does), then every
problem with a measured cost, most expensive first, then the others in the order above.

Each problem's "try:" hint is the remedy table's (dynscope.analysis.remedies.hint_for), the
same table ``dynscope fix`` takes its trials from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import ClassVar, Literal, Protocol, TypeAlias, TypeVar

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.names import condensed, first_line, friendly_function, plural
from dynscope.analysis.remedies import BreakFacts, ErrorFacts, LimitFacts, RecompileFacts, SkippedFacts, hint_for
from dynscope.analysis.runtime import CostedBreak, Costing, FrameRecompiles
from dynscope.events import ProblemKind
from dynscope.model import Capture, CompileError, FixResult, GuardFailure, Recompile, RecompileLimitHit, SkippedFrame, StackFrame

_SEVERITY: dict[ProblemKind, int] = {"error": 0, "recompile_limit": 1, "skipped_frame": 2, "graph_break": 3,
                                     "recompile": 4}


@dataclass(frozen=True, kw_only=True)
class _Problem:
    """What every problem shows; each kind below adds the records behind it."""

    kind: ClassVar[ProblemKind]
    title: str  # one line: what happened
    explanation: str  # one line, plain words: why
    hint: str | None  # one line: what to try
    location: StackFrame  # where in the user's code
    count: int  # occurrences (breaks, recompiles) or 1
    compile_ids: tuple[str, ...]
    compile_time_s: float  # compile time spent on the compiles involved
    cost_s: float | None = None  # measured seconds it cost over the run (profiled runs only)
    cost_detail: str | None = None  # one line: how that cost arose
    calls: int | None = None  # profiled: calls affected (through the break; served by the recompiled versions)
    fixes: tuple[str, ...] = ()  # remedies `dynscope fix` proved on it, one line each

    @property
    def severity(self) -> int:
        return _SEVERITY[self.kind]


@dataclass(frozen=True, kw_only=True)
class CompileErrorProblem(_Problem):
    kind: ClassVar[Literal["error"]] = "error"
    error: CompileError


@dataclass(frozen=True, kw_only=True)
class RecompileLimitProblem(_Problem):
    kind: ClassVar[Literal["recompile_limit"]] = "recompile_limit"
    hit: RecompileLimitHit


@dataclass(frozen=True, kw_only=True)
class SkippedFrameProblem(_Problem):
    """Frames Dynamo gave up on for one cause at one place."""

    kind: ClassVar[Literal["skipped_frame"]] = "skipped_frame"
    frames: tuple[SkippedFrame, ...]


@dataclass(frozen=True, kw_only=True)
class GraphBreakProblem(_Problem):
    kind: ClassVar[Literal["graph_break"]] = "graph_break"
    group: BreakGroup


@dataclass(frozen=True, kw_only=True)
class RecompileProblem(_Problem):
    """The recompiles of one frame."""

    kind: ClassVar[Literal["recompile"]] = "recompile"
    recompiles: tuple[Recompile, ...]


# One type per kind: views `match` on it, and the type checker sees every case (assert_never).
Problem: TypeAlias = CompileErrorProblem | RecompileLimitProblem | SkippedFrameProblem | GraphBreakProblem | RecompileProblem


class RunFacts(Protocol):
    """What the ranking reads: dynscope.analysis.run_view.RunView (derived once per capture)."""

    @property
    def errors(self) -> list[CompileError]: ...
    @property
    def recompile_limit_hits(self) -> list[RecompileLimitHit]: ...
    @property
    def skipped_frames(self) -> list[SkippedFrame]: ...
    @property
    def costed_breaks(self) -> list[CostedBreak]: ...
    @property
    def frame_recompiles(self) -> list[FrameRecompiles]: ...
    @property
    def dynamic_sources(self) -> dict[str, tuple[str, ...]]: ...
    @property
    def compile_seconds(self) -> dict[str, float]: ...
    @property
    def fix_results(self) -> list[FixResult]: ...
    @property
    def profiled(self) -> bool: ...


def top_problems(run: RunFacts) -> list[Problem]:
    """Views read the ranking once, from ``run_view(capture).problems``."""
    seconds = run.compile_seconds
    problems: list[Problem] = [_error(e, seconds) for e in run.errors]
    problems += [_limit_hit(h) for h in run.recompile_limit_hits]
    problems += [_skipped(fs, seconds) for fs in _skipped_by_cause(run.skipped_frames)]
    problems += [_graph_break(b.group, seconds, b.costing) for b in run.costed_breaks]
    dynamic = run.dynamic_sources
    problems += [_recompiles(f.recompiles, seconds, dynamic, f.costing) for f in run.frame_recompiles]
    fixes = run.fix_results
    if fixes:  # what `dynscope fix` proved, beside the problem it fixes
        problems = [replace(p, fixes=tuple(
            f"{f.remedy} ({f.verdict}, outputs equal)" for f in fixes
            if f.matches(p.kind, p.location.file, p.location.line, p.location.function))) for p in problems]
    problems = sorted(problems, key=lambda p: (p.severity, -p.count))  # stable: ties stay in order met
    if not run.profiled:
        return problems
    return sorted(problems, key=lambda p: (p.kind != "error", p.cost_s is None, -(p.cost_s or 0.0)))


_Costed = TypeVar("_Costed", GraphBreakProblem, RecompileProblem)


def _with_cost(p: _Costed, costing: Costing | None) -> _Costed:
    """The problem with what it cost in the profiled run (costing None: the run was not profiled)."""
    if costing is None:
        return p
    return replace(p, cost_s=costing.cost_s, calls=costing.calls, cost_detail=costing.detail)


def _error(e: CompileError, seconds: dict[str, float]) -> CompileErrorProblem:
    where = StackFrame(e.user_file, e.user_line, None) if e.user_file else StackFrame(e.file, e.line, e.function)
    return CompileErrorProblem(
        title=f"{e.fail_type} while compiling {friendly_function(e.function)}",
        explanation=condensed(e.reason, lines=1) or e.fail_type,
        hint=_data_dependent_hint(e) or "run `dynscope minify` on the script to find the failing stage and get a small repro",
        location=where,
        count=1,
        compile_ids=(e.compile_id,),
        compile_time_s=seconds.get(e.compile_id, 0.0),
        error=e,
    )


def _data_dependent_hint(e: CompileError) -> str | None:
    """A guard on a data-dependent value: the torch._check that tells the compiler what it satisfies
    (the remedy table's hint, dynscope.analysis.remedies)."""
    return hint_for("error", ErrorFacts(e.fail_type or "", e.reason or "", e.user_line))


def _limit_hit(h: RecompileLimitHit) -> RecompileLimitProblem:
    limit = f" ({h.limit_name} = {h.limit})" if h.limit is not None else f" ({h.limit_name})"
    return RecompileLimitProblem(
        title=f"{friendly_function(h.function)} hit the recompile limit{limit}",
        explanation=f"from compile {h.compile_id} on, calls that match none of its cached graphs run in eager"
        if not h.fatal else f"torch raised it into the program at compile {h.compile_id}",
        hint=hint_for("recompile_limit", LimitFacts(h.limit, h.limit_name or "recompile_limit")),
        location=StackFrame(h.file, h.line, h.function),
        count=1,
        compile_ids=(h.compile_id,),
        compile_time_s=0.0,
        hit=h,
    )


def _skipped_by_cause(frames: list[SkippedFrame]) -> list[tuple[SkippedFrame, ...]]:
    """One problem per cause and place: the same break skipping the same code is one problem."""
    causes: dict[tuple[str, str | None, int | None], list[SkippedFrame]] = {}
    for f in frames:
        causes.setdefault((f.headline, f.user_file or f.file, f.user_line or f.line), []).append(f)
    return [tuple(fs) for fs in causes.values()]


def _skipped(fs: tuple[SkippedFrame, ...], seconds: dict[str, float]) -> SkippedFrameProblem:
    first = fs[0]
    functions = list(dict.fromkeys(friendly_function(f.function) for f in fs))
    what = ", ".join(functions[:3]) + (f" and {len(functions) - 3} more" if len(functions) > 3 else "")
    times = "" if len(fs) == 1 else f" ({plural(len(fs), 'compile')})"
    return SkippedFrameProblem(
        title=f"ran in eager: {what}{times}",
        explanation=f"Dynamo gave up on the frame because of a graph break it could not handle: {first.headline}",
        hint=hint_for("skipped_frame", SkippedFacts(first.headline)),
        location=StackFrame(first.user_file, first.user_line, None) if first.user_file
        else StackFrame(first.file, first.line, first.function),
        count=len(fs),
        compile_ids=tuple(f.compile_id for f in fs),
        compile_time_s=sum(seconds.get(f.compile_id, 0.0) for f in fs),
        frames=fs,
    )


def _graph_break(g: BreakGroup, seconds: dict[str, float], costing: Costing | None) -> GraphBreakProblem:
    why = first_line(g.explanation) or condensed(g.reason, lines=1)
    if g.consequences:
        why = f"{why} ({'; '.join(g.consequences)})" if why else "; ".join(g.consequences)
    return _with_cost(GraphBreakProblem(
        title=f"graph break: {g.headline}",
        explanation=why,
        hint=hint_for("graph_break", BreakFacts(g.gb_type or "", g.reason or "", tuple(g.hints), g.location.code or "")),
        location=g.location,
        count=g.count,
        compile_ids=tuple(g.compile_ids),
        compile_time_s=sum(seconds.get(c, 0.0) for c in g.compile_ids),
        group=g,
    ), costing)


def recompiles_by_frame(recompiles: list[Recompile]) -> list[tuple[Recompile, ...]]:
    """One group per frame (function, file, line), each in the order met."""
    frames: dict[tuple[str, str | None, int | None], list[Recompile]] = {}
    for r in recompiles:
        frames.setdefault((r.function, r.file, r.line), []).append(r)
    return [tuple(rs) for rs in frames.values()]


def _recompiles(rs: tuple[Recompile, ...], seconds: dict[str, float],
                dynamic: dict[str, tuple[str, ...]], costing: Costing | None) -> RecompileProblem:
    first = rs[0]
    # The hint follows the cause that still costs recompiles: a shape change Dynamo answered by
    # making the dimension dynamic cost one recompile and is over.
    live = [r for r in rs if not _made_dynamic(r, dynamic or {})] or list(rs)
    failure = live[0].failures[0]
    guard = failure.guard or live[0].reason
    change = _change(failure)
    others = len(dict.fromkeys(r.failures[0].guard or r.reason for r in live)) - 1
    more = f"; {others} other guard{'s' if others > 1 else ''} too" if others else ""
    settled = len(rs) - len(live) if len(live) < len(rs) else 0
    if settled:
        more += f"; {settled} shape change{'s' if settled > 1 else ''} Dynamo then made dynamic"
    times = "once" if len(rs) == 1 else f"{len(rs)} times"
    return _with_cost(RecompileProblem(
        title=f"{friendly_function(first.function)} recompiled {times}",
        explanation=f"guard failed: {guard}{change}{more}",
        hint=recompile_advice(failure, made_dynamic=_made_dynamic(live[0], dynamic or {})),
        location=StackFrame(first.file, first.line, first.function),
        count=len(rs),
        compile_ids=tuple(r.compile_id for r in rs),
        compile_time_s=sum(seconds.get(r.compile_id, 0.0) for r in rs),
        recompiles=rs,
    ), costing)


def _change(f: GuardFailure) -> str:
    """' (expected 2.0, got 2)' unless torch's text says it already ("expected 4, actual 6")."""
    if f.expected is None and f.actual is None:
        return ""
    if "expected" in (f.guard or "") or "expected" in (f.reason or ""):
        return ""
    return f" (expected {f.expected or '?'}, got {f.actual or '?'})"


_TENSOR_NAME = re.compile(r"tensor '(?P<name>[^']+)' (size|stride) mismatch at index (?P<index>\d+)")


def _made_dynamic(r: Recompile, dynamic: dict[str, tuple[str, ...]]) -> bool:
    """Whether the recompile answered a shape change by making that dimension dynamic (torch's
    automatic dynamic shapes: the new compile created a symbol for it)."""
    match = _TENSOR_NAME.search(r.failures[0].reason or "")
    if not match:
        return False
    name, index = match["name"], match["index"]
    wanted = {f"L['{name}'].size()[{index}]", f"L['{name}'].stride()[{index}]"}
    return any(source in wanted or (source.endswith(f".size()[{index}]") and f"'{name}'" in source)
               for source in dynamic.get(r.compile_id, ()))


def advice_for(capture: Capture, r: Recompile) -> str | None:
    """What to try about one recompile, from what the capture recorded about it."""
    return recompile_advice(r.failures[0], made_dynamic=_made_dynamic(r, capture.dynamic_sources()))


def recompile_advice(f: GuardFailure, *, made_dynamic: bool = False) -> str | None:
    """What to try, from the recorded facts of one guard failure (the remedy table's hint,
    dynscope.analysis.remedies); None when they say too little."""

    return hint_for("recompile", RecompileFacts(f.guard, f.reason, f.expected, f.actual, (f.guard or f.reason or "",),
                                                made_dynamic=made_dynamic))
