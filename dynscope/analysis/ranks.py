"""Where the ranks of a distributed run compiled differently."""

from __future__ import annotations

from dataclasses import dataclass

from dynscope.analysis.breaks import group_breaks
from dynscope.analysis.names import friendly_function, location
from dynscope.analysis.overview import Totals, totals
from dynscope.model import Capture


@dataclass(frozen=True)
class UnevenItem:
    """A graph break or recompile that some ranks had and others did not."""

    what: str  # "graph break" | "recompile"
    detail: str
    ranks: tuple[str, ...]  # labels of the ranks that had it


@dataclass(frozen=True)
class RankDifferences:
    labels: tuple[str, ...]
    totals: tuple[Totals, ...]  # per rank, in the order of ``labels``
    uneven: tuple[UnevenItem, ...]

    @property
    def same(self) -> bool:
        counts = {(t.compiles, t.graph_breaks, t.recompiles, t.errors) for t in self.totals}
        return not self.uneven and len(counts) <= 1


def rank_label(capture: Capture, index: int) -> str:
    return f"rank {capture.run.rank}" if capture.run.rank is not None else f"capture {index}"


def rank_differences(captures: list[Capture]) -> RankDifferences:
    labels = tuple(rank_label(c, i) for i, c in enumerate(captures))
    seen: dict[tuple[str, str], set[int]] = {}
    for i, capture in enumerate(captures):
        cwd = capture.run.cwd
        for g in group_breaks(capture.graph_breaks()):
            seen.setdefault(("graph break", f"{g.headline} at {location(g.location.file, g.location.line, cwd)}"),
                            set()).add(i)
        for r in capture.recompiles():
            seen.setdefault(("recompile", f"{friendly_function(r.function)}: {r.failures[0].guard or r.reason}"),
                            set()).add(i)
    everyone = set(range(len(captures)))
    uneven = tuple(UnevenItem(what, detail, tuple(labels[i] for i in sorted(ranks)))
                   for (what, detail), ranks in seen.items() if ranks != everyone)
    return RankDifferences(labels, tuple(totals(c) for c in captures), uneven)
