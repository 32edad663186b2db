"""The problems ``dynscope fix`` works on: the run view's typed problems (``RunView.problems``,
dynscope/analysis/problems.py), each given a key that names it across runs.

Nothing is derived a second time: a compile error, a recompile-limit hit and a graph break are the
view's problem as it is; the view's recompiles of one frame are split by cause (a batch size that
changes and an int that changes are two problems with different remedies). Skipped frames have no
remedy of their own (the break that caused them does). Fix lists them in the order torch met them,
worst kind first, as before the view ranked them: the trials are numbered in that order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.fix_problems import (
    BreakFacts,
    ErrorFacts,
    FixProblem,
    LimitFacts,
    ProblemKey,
    RecompileFacts,
    fresh_symbols,
    recompile_cause,
)
from dynscope.analysis.problems import (
    CompileErrorProblem,
    GraphBreakProblem,
    Problem,
    RecompileLimitProblem,
    RecompileProblem,
)
from dynscope.model import CompileError, Recompile, RecompileLimitHit


class ProblemView(Protocol):
    """What the problems are read from: dynscope.analysis.run_view.RunView."""

    @property
    def problems(self) -> list[Problem]: ...
    @property
    def errors(self) -> list[CompileError]: ...
    @property
    def recompile_limit_hits(self) -> list[RecompileLimitHit]: ...
    @property
    def break_groups(self) -> list[BreakGroup]: ...
    @property
    def recompiles(self) -> list[Recompile]: ...


# A trial that ran changed source records lines of the changed text: this maps (file, line) back
# to the line of the file on disk, so a problem keeps its key (dynscope/fix/trials.py).
Relocate = Callable[["str | None", "int | None"], "int | None"]


def _same_line(_file: str | None, line: int | None) -> int | None:
    return line


def fix_problems(view: ProblemView, relocate: Relocate = _same_line) -> list[FixProblem]:
    """Every compile error, recompile-limit hit, graph break (by cause and line) and recompiled
    frame (by cause) of one run: errors, limit hits, breaks, recompiles, each kind in the order met."""
    met = _met_order(view)
    found: list[tuple[tuple[int, int], FixProblem]] = []
    for p in view.problems:
        match p:
            case CompileErrorProblem():
                found.append(((0, met[id(p.error)]), _error(p.error, relocate)))
            case RecompileLimitProblem():
                found.append(((1, met[id(p.hit)]), _limit(p.hit, relocate)))
            case GraphBreakProblem():
                found.append(((2, met[id(p.group)]), _graph_break(p.group, relocate)))
            case RecompileProblem():
                found += [((3, met[id(rs[0])]), _recompiles(cause, rs, relocate))
                          for cause, rs in _by_cause(p.recompiles, relocate)]
    return _merged([problem for _, problem in sorted(found, key=lambda item: item[0])])


def _met_order(view: ProblemView) -> dict[int, int]:
    """Each record's place in the order torch met it (the view's ranked list puts the most frequent first)."""
    order: dict[int, int] = {}
    for records in (view.errors, view.recompile_limit_hits, view.break_groups, view.recompiles):
        order.update({id(r): i for i, r in enumerate(records)})
    return order


def _error(e: CompileError, at: Relocate) -> FixProblem:
    key = ProblemKey("error", e.fail_type, e.file, at(e.file, e.line), e.function)
    return FixProblem("error", key, e.user_file or e.file, at(e.user_file, e.user_line) if e.user_line else key.line,
                      e.function, f"{e.fail_type} while compiling {e.function}", 1,
                      ErrorFacts(e.fail_type or "", e.reason or "", at(e.user_file, e.user_line)))


def _limit(h: RecompileLimitHit, at: Relocate) -> FixProblem:
    key = ProblemKey("limit", None, h.file, at(h.file, h.line), h.function)
    return FixProblem("recompile_limit", key, h.file, key.line, h.function,
                      f"{h.function} hit the recompile limit ({h.limit_name} = {h.limit})", 1,
                      LimitFacts(h.limit, h.limit_name or "recompile_limit"))


def _graph_break(g: BreakGroup, at: Relocate) -> FixProblem:
    where = g.location
    key = ProblemKey("break", fresh_symbols(g.gb_type or g.headline), where.file, at(where.file, where.line))
    return FixProblem("graph_break", key, where.file, key.line, where.function, g.headline or g.gb_type or "graph break",
                      g.count or 1, BreakFacts(g.gb_type or "", g.reason or "", tuple(g.hints), where.code or "",
                                               _callers(g)))


def _callers(g: BreakGroup) -> tuple[tuple[str, int], ...]:
    """The frames above the break's own, nearest first, from its first occurrence's stack."""
    stack = g.occurrences[0].user_stack if g.occurrences else ()
    own = next((i for i in range(len(stack) - 1, -1, -1) if stack[i] == g.location), None)
    if own is None:
        return ()
    return tuple((f.file, f.line) for f in reversed(stack[:own]) if f.file and f.line)


def _by_cause(recompiles: Sequence[Recompile], at: Relocate) -> list[tuple[str, tuple[Recompile, ...]]]:
    """One frame's recompiles split by what changed (and the line they relocate to), in the order met."""
    causes: dict[tuple[int | None, str], list[Recompile]] = {}
    for r in recompiles:
        first_guard = r.failures[0].guard if r.failures else None
        cause, _ = recompile_cause(first_guard or r.reason or "")
        causes.setdefault((at(r.file, r.line), fresh_symbols(cause)), []).append(r)
    return [(cause, tuple(rs)) for (_, cause), rs in causes.items()]


def _recompiles(cause: str, rs: tuple[Recompile, ...], at: Relocate) -> FixProblem:
    first_run = rs[0]
    failures = [r.failures[0] for r in rs if r.failures]
    first = failures[0] if failures else None
    _, words = recompile_cause((first.guard if first else None) or first_run.reason or "")
    line = at(first_run.file, first_run.line)
    key = ProblemKey("recompile", cause, first_run.file, line, first_run.function)
    expected, actual = (first.expected, first.actual) if first else (None, None)
    change = f": {expected} → {actual}" if expected is not None else ""
    return FixProblem("recompile", key, first_run.file, line, first_run.function,
                      f"{_friendly(first_run.function)} recompiled {_times(len(rs))}: {words}{change}", len(rs),
                      RecompileFacts(first.guard if first else None, first.reason if first else None, expected, actual,
                                     tuple(f.guard or f.reason or "" for f in failures)))


def _merged(problems: list[FixProblem]) -> list[FixProblem]:
    """Problems of one key made one (their occurrences summed), in first-seen order."""
    by_key: dict[ProblemKey, FixProblem] = {}
    for p in problems:
        seen = by_key.get(p.key)
        by_key[p.key] = p if seen is None else replace(seen, count=seen.count + p.count)
    return list(by_key.values())


def problem_counts(problems: Sequence[FixProblem]) -> dict[ProblemKey, int]:
    """Problem key -> occurrences, for comparing a trial with the baseline."""
    return {p.key: p.count for p in problems}


def _friendly(function: str | None) -> str:
    match = re.match(r"torch_dynamo_resume_in_(\w+)_at_(\d+)", function or "")
    return f"{match[1]} (after the break at line {match[2]})" if match else (function or "?")


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"
