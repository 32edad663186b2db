"""Group identical graph breaks and rank them by impact."""

from __future__ import annotations

from dataclasses import dataclass

from dynscope.model import GraphBreak, StackFrame


@dataclass(frozen=True)
class BreakGroup:
    """Every occurrence of one kind of break at one place in the user's code."""

    headline: str
    gb_type: str | None
    gb_id: str | None
    doc_link: str | None
    reason: str  # torch's message (the counters["graph_break"] key) of the first occurrence
    explanation: str | None
    hints: tuple[str, ...]
    location: StackFrame
    occurrences: tuple[GraphBreak, ...]

    @property
    def count(self) -> int:
        return len(self.occurrences)

    @property
    def compile_ids(self) -> list[str]:
        return list(dict.fromkeys(b.compile_id for b in self.occurrences if b.compile_id))

    @property
    def resumed_into(self) -> list[str]:
        return list(dict.fromkeys(b.resumed_into for b in self.occurrences if b.resumed_into))

    @property
    def consequences(self) -> list[str]:
        """What the break cost beyond a split graph, as torch recorded it (distinct, in order met)."""
        return list(dict.fromkeys(b.consequence for b in self.occurrences if b.consequence))

    @property
    def skipped_compile_ids(self) -> list[str]:
        """Compiles whose whole frame fell back to eager because of this break."""
        return list(dict.fromkeys(b.compile_id for b in self.occurrences if b.frame_skipped and b.compile_id))

    @property
    def first(self) -> GraphBreak:
        return self.occurrences[0]


def group_breaks(breaks: list[GraphBreak]) -> list[BreakGroup]:
    """Same type at the same file:line is one group (a chained break such as "graph break in
    loop" is typed by its root cause, so it joins its cause's group). Most frequent first, then
    first seen."""
    groups: dict[tuple[str, str | None, int | None], list[GraphBreak]] = {}
    for b in breaks:
        loc = b.location
        groups.setdefault((b.gb_type or b.headline, loc.file, loc.line), []).append(b)
    result = [
        BreakGroup(
            headline=bs[0].headline,
            gb_type=bs[0].gb_type,
            gb_id=bs[0].gb_id,
            doc_link=bs[0].doc_link,
            reason=bs[0].message,
            explanation=bs[0].explanation,
            hints=bs[0].hints,
            location=bs[0].location,
            occurrences=tuple(bs),
        )
        for bs in groups.values()
    ]
    order = {id(g): i for i, g in enumerate(result)}
    return sorted(result, key=lambda g: (-g.count, order[id(g)]))

