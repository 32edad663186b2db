"""What the views show of a numerics check (``dynscope numerics``), derived once.

The error along each graph (one series per graph and direction, in node order: the x axis of the
plot), where the compiled error grows (a jump of more than GROWTH_FACTOR over the node before), the
first suspect with its source site and the criterion in words, and the "try:" lines of the remedy
table for it. Pure functions of the model; every view (terminal, Markdown, HTML, JSON, TUI) reads
``RunView.numerics``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from dynscope.analysis.names import plural
from dynscope.analysis.remedies import FixProblem, hints_for, numerics_problem
from dynscope.events import NumericsNode
from dynscope.model import Compile
from dynscope.model.numerics import Numerics, Verdict

GROWTH_FACTOR = 10.0  # a node whose compiled error exceeds the previous node's by more than this is marked
ERROR_FLOOR = 1e-12  # an error of 0 (or below this) is drawn here: log10 has no value for 0


@dataclass(frozen=True)
class ErrorPoint:
    """One node on the plot: its errors as log10 (None: not a finite number) and its marks."""

    node: NumericsNode
    compiled_log10: float | None
    eager_log10: float | None
    growth: bool  # the compiled error jumped by more than GROWTH_FACTOR over the previous node
    first_suspect: bool

    @property
    def suspect(self) -> bool:
        return self.node.suspect

    @property
    def nondeterministic(self) -> bool:
        return self.node.nondeterministic


@dataclass(frozen=True)
class ErrorSeries:
    """One graph's nodes in one direction, in node order."""

    graph: str
    direction: str
    points: tuple[ErrorPoint, ...]

    @property
    def label(self) -> str:
        return f"graph {self.graph} {self.direction}"


@dataclass(frozen=True)
class NumericsView:
    numerics: Numerics
    frames: Mapping[str, tuple[str, str | None]]  # compile id -> (function, file) of the compiled frame

    @property
    def verdict(self) -> Verdict:
        return self.numerics.verdict

    @property
    def first_suspect(self) -> NumericsNode | None:
        return self.numerics.first_suspect

    @property
    def suspect_count(self) -> int:
        return len(self.numerics.suspects)

    @property
    def nondeterministic_count(self) -> int:
        return len(self.numerics.nondeterministic)

    @cached_property
    def criterion(self) -> str:
        """The criterion in words: as recorded, else made from the factor and tolerance."""
        n = self.numerics
        if n.criterion:
            return n.criterion
        return (f"a node is suspect when its compiled error exceeds {n.factor:g} × eager's own error + {n.tolerance:g} "
                f"(both against a {n.reference_dtype or 'higher-precision'} reference)")

    @cached_property
    def verdict_line(self) -> str:
        """The verdict in one line."""
        n, first = self.numerics, self.first_suspect
        if self.verdict == "suspect" and first is not None:
            return f"compiled and eager part ways at {first.node} ({first.op}): {plural(self.suspect_count, 'suspect node')}"
        if self.verdict == "nondeterministic":
            return (f"no suspect: {plural(self.nondeterministic_count, 'node')} changed from one compiled run to the "
                    "next (nondeterministic, not blamed)")
        if self.verdict == "suspect":
            return plural(self.suspect_count, "suspect node")
        return (f"the compiled run stays within eager's own error ({plural(len(n.nodes), 'node')} in "
                f"{plural(n.graphs_checked, 'graph')})")

    @cached_property
    def series(self) -> tuple[ErrorSeries, ...]:
        """One series per graph and direction, in the order first recorded; each in node order."""
        groups: dict[tuple[str, str], list[NumericsNode]] = {}
        for node in self.numerics.nodes:
            groups.setdefault((node.graph, node.direction), []).append(node)
        first = self.first_suspect
        out = []
        for (graph, direction), nodes in groups.items():
            nodes.sort(key=lambda n: n.index)
            points, previous = [], None
            for node in nodes:
                grew = previous is not None and growth(previous.compiled_error, node.compiled_error)
                points.append(ErrorPoint(node, log10_error(node.compiled_error), log10_error(node.eager_error), grew,
                                         node is first))
                previous = node
            out.append(ErrorSeries(graph, direction, tuple(points)))
        return tuple(out)

    @cached_property
    def growth_nodes(self) -> tuple[NumericsNode, ...]:
        return tuple(p.node for s in self.series for p in s.points if p.growth)

    @cached_property
    def problem(self) -> FixProblem | None:
        """The first suspect as the remedy table's problem (None: no suspect)."""
        first = self.first_suspect
        return None if first is None else numerics_problem(first, self.numerics.program_dtype, self.frames.get(first.graph))

    @cached_property
    def hints(self) -> tuple[str, ...]:
        """The summary's "try:" lines for the first suspect, from the remedy table."""
        problem = self.problem
        return () if problem is None else tuple(hints_for("numerics", problem.facts))


def log10_error(error: float) -> float | None:
    """log10 of an error, floored at ERROR_FLOOR; None for inf and nan (drawn as "not a number")."""
    if not math.isfinite(error):
        return None
    return math.log10(max(error, ERROR_FLOOR))


def growth(before: float, after: float) -> bool:
    """The compiled error jumped by more than GROWTH_FACTOR from one node to the next (errors under the
    floor count as the floor, so rounding noise around zero is not growth)."""
    if not math.isfinite(after):
        return math.isfinite(before)
    if not math.isfinite(before):
        return False
    return max(after, ERROR_FLOOR) > GROWTH_FACTOR * max(before, ERROR_FLOOR)


def numerics_view(numerics: Numerics | None, compiles: Sequence[Compile]) -> NumericsView | None:
    if numerics is None:
        return None
    return NumericsView(numerics, {c.compile_id: (c.function, c.file) for c in compiles})
