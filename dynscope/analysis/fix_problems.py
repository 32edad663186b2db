"""The problems ``dynscope fix`` and the remedy table work on, with the typed facts remedies are chosen from.

Problems come from the run's view, so the same code reads a baseline run, a trial run and a
recorded capture, and is tested without torch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from dynscope.analysis.breaks import BreakGroup
from dynscope.events import (
    FIX_FAMILY,
    FixFamily,
    NumericsNode,
    RemedyKind,
)
from dynscope.model import CompileError, Recompile, RecompileLimitHit
from dynscope.model.numerics import node_site


@dataclass(frozen=True)
class BreakFacts:
    gb_type: str
    reason: str
    hints: tuple[str, ...]
    code: str  # the source line of the break, when torch recorded it


@dataclass(frozen=True)
class LimitFacts:
    limit: int | None
    limit_name: str


@dataclass(frozen=True)
class RecompileFacts:
    guard: str | None  # the first failing guard (the summary's hint reads it with its reason)
    reason: str | None
    expected: str | None
    actual: str | None
    guards: tuple[str, ...] = ()  # every recompile's first failing guard (fix reads them all)
    made_dynamic: bool = False  # Dynamo answered the shape change by making the dimension dynamic


@dataclass(frozen=True)
class ErrorFacts:
    fail_type: str
    reason: str
    user_line: int | None


@dataclass(frozen=True)
class SkippedFacts:
    headline: str  # the break Dynamo could not handle


@dataclass(frozen=True)
class NumericsFacts:
    """The first suspect of a numerics check (``dynscope numerics``): where compiled and eager part ways."""

    node: str  # the post-grad FX node
    op: str  # its target, "aten.relu.default"
    kernel: str  # the generated kernel computing it; "" for an extern call or none
    program_dtype: str  # "bfloat16", "float16", "float32"...
    function: str | None  # the user's function of the suspect's source line (innermost frame)
    file: str | None
    line: int | None
    compiled_frame: bool = False  # the function is the frame torch.compile compiled (disabling it compiles nothing)

    @property
    def random(self) -> bool:
        """A random op: eager and compiled draw different numbers unless Inductor falls back to eager's RNG."""
        op = self.op.lower()
        return any(word in op for word in _RANDOM_OP_WORDS)

    @property
    def low_precision(self) -> bool:
        return self.program_dtype in ("bfloat16", "float16", "torch.bfloat16", "torch.float16", "bf16", "fp16")


Facts = BreakFacts | LimitFacts | RecompileFacts | ErrorFacts | SkippedFacts | NumericsFacts


@dataclass(frozen=True)
class FixProblem:
    kind: RemedyKind
    key: str  # identity across runs: the same problem in a trial has the same key
    file: str | None
    line: int | None
    function: str | None
    detail: str  # one line: what happened
    count: int  # occurrences (breaks, recompiles) or 1
    facts: Facts  # what the remedies are chosen from

    @property
    def family(self) -> FixFamily:
        """The fix document's kind (docs/fix-json.md)."""
        return FIX_FAMILY[self.kind]


class ProblemSource(Protocol):
    """What problems are read from: dynscope.analysis.run_view.RunView."""

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


def problems_of(run: ProblemSource, relocate: Relocate = _same_line) -> list[FixProblem]:
    """Every compile error, recompile-limit hit, graph break (by cause and line) and recompiled
    frame (by cause) of one run, worst kind first as ``dynscope summary`` lists them."""
    problems: list[FixProblem] = []
    at = relocate
    for e in run.errors:
        problems.append(FixProblem(
            "error", f"error|{e.fail_type}|{e.function}|{e.file}|{at(e.file, e.line)}", e.user_file or e.file,
            at(e.user_file, e.user_line) if e.user_line else at(e.file, e.line), e.function,
            f"{e.fail_type} while compiling {e.function}", 1,
            ErrorFacts(e.fail_type or "", e.reason or "", at(e.user_file, e.user_line))))
    for h in run.recompile_limit_hits:
        problems.append(FixProblem(
            "recompile_limit", f"limit|{h.function}|{h.file}|{at(h.file, h.line)}", h.file, at(h.file, h.line),
            h.function, f"{h.function} hit the recompile limit ({h.limit_name} = {h.limit})", 1,
            LimitFacts(h.limit, h.limit_name or "recompile_limit")))
    for g in run.break_groups:
        where = g.location
        line = at(where.file, where.line)
        problems.append(FixProblem(
            "graph_break", f"break|{fresh_symbols(g.gb_type or g.headline)}|{where.file}|{line}", where.file, line,
            where.function, g.headline or g.gb_type or "graph break", g.count or 1,
            BreakFacts(g.gb_type or "", g.reason or "", tuple(g.hints), where.code or "")))
    # One problem per recompiled frame and cause: a batch size that changes and an int that
    # changes are two problems with different remedies, even in the same function.
    causes: dict[tuple[str, str | None, int | None, str], list[Recompile]] = {}
    for r in run.recompiles:
        first_guard = r.failures[0].guard if r.failures else None
        cause, _ = recompile_cause(first_guard or r.reason or "")
        causes.setdefault((r.function, r.file, at(r.file, r.line), fresh_symbols(cause)), []).append(r)
    for (function, file, line, cause), rs in causes.items():
        failures = [r.failures[0] for r in rs if r.failures]
        first = failures[0] if failures else None
        _, words = recompile_cause((first.guard if first else None) or rs[0].reason or "")
        expected, actual = (first.expected, first.actual) if first else (None, None)
        change = f": {expected} → {actual}" if expected is not None else ""
        problems.append(FixProblem(
            "recompile", f"recompile|{function}|{file}|{line}|{cause}", file, line, function,
            f"{_friendly(function)} recompiled {_times(len(rs))}: {words}{change}", len(rs),
            RecompileFacts(first.guard if first else None, first.reason if first else None, expected, actual,
                           tuple(f.guard or f.reason or "" for f in failures))))
    return _merged(problems)


_FRESH_SYMBOL = re.compile(r"\b[us]\d+\b")


def fresh_symbols(text: str) -> str:
    """A problem's cause with torch's fresh symbol names (u0, u1, s0...) made one: the same guard
    on the same line, met again, gets a new symbol and is still one problem."""
    return _FRESH_SYMBOL.sub("u?", text)


def _merged(problems: list[FixProblem]) -> list[FixProblem]:
    """Problems of one key made one (their occurrences summed), in first-seen order."""
    by_key: dict[str, FixProblem] = {}
    for p in problems:
        seen = by_key.get(p.key)
        by_key[p.key] = p if seen is None else replace(seen, count=seen.count + p.count)
    return list(by_key.values())


def site_of(key: str) -> tuple[str, str] | None:
    """(file, line) of a graph-break problem's key (``break|cause|file|line``); None for other kinds."""
    if not key.startswith("break|"):
        return None
    _, file, line = key.rsplit("|", 2)
    return file, line


def recompile_cause(guard: str) -> tuple[str, str]:
    """(identity, words) of what changed: "size x 0" / "the size of x's dimension 0 changed"."""
    size = SIZE_GUARD.search(guard)
    if size:
        return f"size {size['name']} {size['dim']}", f"the size of {size['name']}'s dimension {size['dim']} changed"
    value = _VALUE_GUARD.search(guard)
    if value:
        return f"value {value['name']}", f"the value of {value['name']} changed (Dynamo specialized on it)"
    line = _first_line(guard)
    return f"guard {line}", f"guard failed: {line}"


def problem_counts(problems: Sequence[FixProblem]) -> dict[str, int]:
    """Problem key -> occurrences, for comparing a trial with the baseline."""
    return {p.key: p.count for p in problems}


def _friendly(function: str | None) -> str:
    match = re.match(r"torch_dynamo_resume_in_(\w+)_at_(\d+)", function or "")
    return f"{match[1]} (after the break at line {match[2]})" if match else (function or "?")


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# Ops whose result is random (dynscope/minifier/fragment.py skips comparing them for the same reason).
_RANDOM_OP_WORDS = ("dropout", "rand", "bernoulli", "normal", "multinomial", "uniform", "exponential", "poisson",
                    "cauchy", "geometric", "log_normal")


SIZE_GUARD = re.compile(r"tensor '(?P<name>[A-Za-z_][\w.]*(?:\['[^']*'\])*)' (?:size|stride) mismatch at index (?P<dim>\d+)")


_VALUE_GUARD = re.compile(r"(?P<name>(?:L\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+)*) == ")


def base_name(path: str | None) -> str:
    return (path or "?").replace("\\", "/").rsplit("/", 1)[-1]


def numerics_problem(suspect: NumericsNode, program_dtype: str, compiled: tuple[str, str | None] | None = None
                     ) -> FixProblem:
    """The first suspect of a numerics check as a problem the table's numerics entries serve. Not one
    of ``problems_of``: ``fix`` judges by equal outputs, a numerics remedy by the error it removes.
    ``compiled``: (function, file) of the frame whose graph holds the suspect."""
    site = node_site(suspect)
    file, line, function = site.file, site.line, site.function
    in_frame = compiled is not None and function == compiled[0] and base_name(file) == base_name(compiled[1])
    facts = NumericsFacts(suspect.node, suspect.op, suspect.kernel, program_dtype, function, file, line, in_frame)
    return FixProblem("numerics", f"numerics|{suspect.graph}|{suspect.direction}|{suspect.op}|{file}|{line}", file,
                      line, function, f"{suspect.op} ({suspect.node}) is where compiled and eager part ways", 1, facts)
