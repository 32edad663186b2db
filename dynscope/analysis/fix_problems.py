"""The problems ``dynscope fix`` and the remedy table work on, with the typed facts remedies are chosen from.

fix_view.py makes them from the run view's typed problems, so the same code reads a baseline run,
a trial run and a recorded capture, and is tested without torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from dynscope.events import (
    FIX_FAMILY,
    FixFamily,
    NumericsNode,
    RemedyKind,
)
from dynscope.model.numerics import node_site


@dataclass(frozen=True)
class BreakFacts:
    gb_type: str
    reason: str
    hints: tuple[str, ...]
    code: str  # the source line of the break, when torch recorded it
    # the frames that called into the break's function, nearest first (file, line): where an escape hatch may go
    # when the function itself cannot take one (a NumPy helper: arrays in, arrays out)
    callers: tuple[tuple[str, int], ...] = ()


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
class ProblemKey:
    """A problem's identity across runs: the same problem in a trial has the same key. Its text
    (``str``) is what the document writes (``problems_left``)."""

    kind: KeyKind
    cause: str | None  # the break's or recompile's cause, the error's failure type, a numerics suspect's op
    file: str | None
    line: int | None
    function: str | None = None  # errors, recompile-limit hits and recompiles are per function
    extra: tuple[str, ...] = ()  # a numerics suspect: its graph and direction

    def __str__(self) -> str:
        match self.kind:
            case "break":
                return f"break|{self.cause}|{self.file}|{self.line}"
            case "error":
                return f"error|{self.cause}|{self.function}|{self.file}|{self.line}"
            case "limit":
                return f"limit|{self.function}|{self.file}|{self.line}"
            case "recompile":
                return f"recompile|{self.function}|{self.file}|{self.line}|{self.cause}"
            case "numerics":
                return "|".join(["numerics", *self.extra, str(self.cause), str(self.file), str(self.line)])

    @property
    def site(self) -> tuple[str | None, int | None] | None:
        """(file, line) of a graph break: a line that breaks for another reason is the same site."""
        return (self.file, self.line) if self.kind == "break" else None

    @property
    def short(self) -> str:
        """In a verdict's words: "break Unsupported Tensor.item() call", "recompile forward"."""
        named = {"limit": self.function, "recompile": self.function, "numerics": self.extra[0] if self.extra else None}
        return f"{self.kind} {named.get(self.kind, self.cause)}"


KeyKind = Literal["break", "error", "limit", "recompile", "numerics"]


@dataclass(frozen=True)
class FixProblem:
    kind: RemedyKind
    key: ProblemKey  # identity across runs: the same problem in a trial has the same key
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


_FRESH_SYMBOL = re.compile(r"\b[us]\d+\b")


def fresh_symbols(text: str) -> str:
    """A problem's cause with torch's fresh symbol names (u0, u1, s0...) made one: the same guard
    on the same line, met again, gets a new symbol and is still one problem."""
    return _FRESH_SYMBOL.sub("u?", text)


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
    of ``fix_problems``: ``fix`` judges by equal outputs, a numerics remedy by the error it removes.
    ``compiled``: (function, file) of the frame whose graph holds the suspect."""
    site = node_site(suspect)
    file, line, function = site.file, site.line, site.function
    in_frame = compiled is not None and function == compiled[0] and base_name(file) == base_name(compiled[1])
    facts = NumericsFacts(suspect.node, suspect.op, suspect.kernel, program_dtype, function, file, line, in_frame)
    key = ProblemKey("numerics", suspect.op, file, line, extra=(suspect.graph, suspect.direction))
    return FixProblem("numerics", key, file,
                      line, function, f"{suspect.op} ({suspect.node}) is where compiled and eager part ways", 1, facts)
