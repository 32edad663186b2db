"""What went wrong in a run, ranked by impact: the first thing every view shows.

Ranking, most harmful first:
1. compile errors: the frame falls back to eager (or the program dies), so it gets no speed-up at all;
2. graph breaks: every call of the frame runs split graphs with Python in between, so they
   cost on every step; more occurrences rank higher;
3. recompiles: a one-off compile cost per new guard value, until the recompile limit makes
   the frame run eagerly; more recompiles of a frame rank higher.
Within a kind, ties keep the order torch met the problems in, so a run always ranks the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dynscope.analysis.breaks import BreakGroup, group_breaks
from dynscope.analysis.names import condensed, first_line, friendly_function
from dynscope.analysis.overview import compile_seconds
from dynscope.model import Capture, CompileError, Recompile, StackFrame

_SEVERITY = {"error": 0, "graph_break": 1, "recompile": 2}


@dataclass(frozen=True)
class Problem:
    kind: str  # "error" | "graph_break" | "recompile"
    title: str  # one line: what happened
    explanation: str  # one line, plain words: why
    hint: str | None  # one line: what to try
    location: StackFrame  # where in the user's code
    count: int  # occurrences (breaks, recompiles) or 1
    compile_ids: tuple[str, ...]
    compile_time_s: float  # compile time spent on the compiles involved
    subject: BreakGroup | tuple[Recompile, ...] | CompileError  # the records behind it

    @property
    def severity(self) -> int:
        return _SEVERITY[self.kind]


def top_problems(capture: Capture) -> list[Problem]:
    seconds = {c.compile_id: compile_seconds(c) for c in capture.compiles()}
    problems = [_error(e, seconds) for e in capture.errors()]
    problems += [_graph_break(g, seconds) for g in group_breaks(capture.graph_breaks())]
    problems += [_recompiles(rs, seconds) for rs in _recompiles_by_frame(capture.recompiles())]
    return sorted(problems, key=lambda p: (p.severity, -p.count))  # stable: ties stay in order met


def _error(e: CompileError, seconds: dict[str, float]) -> Problem:
    where = StackFrame(e.user_file, e.user_line, None) if e.user_file else StackFrame(e.file, e.line, e.function)
    return Problem(
        kind="error",
        title=f"{e.fail_type} while compiling {friendly_function(e.function)}",
        explanation=condensed(e.reason, lines=1) or e.fail_type,
        hint="run `dynscope minify` on the script to find the failing stage and get a small repro",
        location=where,
        count=1,
        compile_ids=(e.compile_id,),
        compile_time_s=seconds.get(e.compile_id, 0.0),
        subject=e,
    )


def _graph_break(g: BreakGroup, seconds: dict[str, float]) -> Problem:
    return Problem(
        kind="graph_break",
        title=f"graph break: {g.headline}",
        explanation=first_line(g.explanation) or condensed(g.reason, lines=1),
        hint=first_line(g.hints[0]) if g.hints else None,
        location=g.location,
        count=g.count,
        compile_ids=tuple(g.compile_ids),
        compile_time_s=sum(seconds.get(c, 0.0) for c in g.compile_ids),
        subject=g,
    )


def _recompiles_by_frame(recompiles: list[Recompile]) -> list[tuple[Recompile, ...]]:
    frames: dict[tuple, list[Recompile]] = {}
    for r in recompiles:
        frames.setdefault((r.function, r.file, r.line), []).append(r)
    return [tuple(rs) for rs in frames.values()]


def _recompiles(rs: tuple[Recompile, ...], seconds: dict[str, float]) -> Problem:
    first = rs[0]
    guards = list(dict.fromkeys(r.failures[0].guard or r.reason for r in rs))
    failure = first.failures[0]
    change = ""
    already_said = "expected" in (guards[0] or "")  # torch's tensor guards say "expected 4, actual 6"
    if not already_said and (failure.expected is not None or failure.actual is not None):
        change = f" (expected {failure.expected or '?'}, got {failure.actual or '?'})"
    more = f"; {len(guards) - 1} other guard{'s' if len(guards) > 2 else ''} too" if len(guards) > 1 else ""
    times = "once" if len(rs) == 1 else f"{len(rs)} times"
    return Problem(
        kind="recompile",
        title=f"{friendly_function(first.function)} recompiled {times}",
        explanation=f"guard failed: {guards[0]}{change}{more}",
        hint=recompile_hint(failure.reason),
        location=StackFrame(first.file, first.line, first.function),
        count=len(rs),
        compile_ids=tuple(r.compile_id for r in rs),
        compile_time_s=sum(seconds.get(r.compile_id, 0.0) for r in rs),
        subject=rs,
    )


_HINTS = (
    (re.compile(r"size mismatch|stride mismatch|sizes? of|\.size\(\)"),
     "the input's shape changes between calls: mark the dimension dynamic "
     "(torch._dynamo.mark_dynamic(x, dim)) or compile with dynamic=True"),
    (re.compile(r"dtype mismatch|device mismatch|requires_grad mismatch"),
     "the input's dtype, device or requires_grad changed: each combination needs its own graph"),
    (re.compile(r"___check_type_id|type\(|TYPE_MATCH"),
     "a value changed type (e.g. int vs float): pass the same type on every call"),
    (re.compile(r"=="),
     "Dynamo specialized on a Python value that changed: keep it constant, or pass it as a tensor"),
)


def recompile_hint(reason: str) -> str | None:
    """What to try, from torch's guard-failure text."""
    for pattern, hint in _HINTS:
        if pattern.search(reason):
            return hint
    return None
