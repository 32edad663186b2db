"""Where the ranks of a distributed run compiled differently.

Two views: ``uneven`` lists every graph break and recompile some ranks had and others not;
``divergence`` walks each rank's sequence of compile steps (compiles, recompiles, cache
hits/misses, the collectives each graph issues, graph breaks) side by side and names the
first step where the ranks part, which ranks, where in the source, and what follows from
it (collectives issued from different graphs: a hang risk). Captures from ``explain``
under torchrun and from ``dynscope import`` of TORCH_TRACE logs are read alike.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from dynscope.analysis.names import friendly_function, location
from dynscope.analysis.overview import Totals
from dynscope.analysis.run_view import run_view
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
    divergence: tuple[Divergence, ...] = ()

    @property
    def same(self) -> bool:
        counts = {(t.compiles, t.graph_breaks, t.recompiles, t.errors) for t in self.totals}
        return not self.uneven and not self.divergence and len(counts) <= 1


def rank_label(capture: Capture, index: int) -> str:
    return f"rank {capture.run.rank}" if capture.run.rank is not None else f"capture {index}"


def rank_differences(captures: list[Capture]) -> RankDifferences:
    labels = tuple(rank_label(c, i) for i, c in enumerate(captures))
    seen: dict[tuple[str, str], set[int]] = {}
    for i, capture in enumerate(captures):
        cwd = capture.run.cwd
        view = run_view(capture)
        for g in view.break_groups:
            seen.setdefault(("graph break", f"{g.headline} at {location(g.location.file, g.location.line, cwd)}"),
                            set()).add(i)
        for r in view.recompiles:
            seen.setdefault(("recompile", f"{friendly_function(r.function)}: {r.failures[0].guard or r.reason}"),
                            set()).add(i)
    everyone = set(range(len(captures)))
    uneven = tuple(UnevenItem(what, detail, tuple(labels[i] for i in sorted(ranks)))
                   for (what, detail), ranks in seen.items() if ranks != everyone)
    return RankDifferences(labels, tuple(run_view(c).totals for c in captures), uneven, divergence(captures))


# -- divergence ---------------------------------------------------------------------------

KINDS = ("compile", "graph_break", "recompile", "cache", "collective")


@dataclass(frozen=True)
class Step:
    """One thing a rank's compiler did; ``key`` is what must match across ranks."""

    what: str  # one of KINDS
    key: tuple[Any, ...]
    phrase: str  # "breaks at model.py:63 (Failed to trace builtin operator)"
    file: str | None
    line: int | None
    function: str | None


@dataclass(frozen=True)
class Divergence:
    what: str  # one of KINDS
    ranks: tuple[int, ...]  # the ranks that part from the others
    file: str | None
    line: int | None
    function: str | None
    detail: str
    first: bool  # the first point where the ranks part (the others: first per kind)

    def as_json(self) -> dict[str, Any]:
        return {"what": self.what, "ranks": list(self.ranks), "file": self.file, "line": self.line,
                "function": self.function, "detail": self.detail, "first": self.first}


def rank_number(capture: Capture, index: int) -> int:
    return capture.run.rank if capture.run.rank is not None else index


def rank_steps(capture: Capture) -> list[Step]:
    """What this rank's compiler did, in compile order."""
    cwd = capture.run.cwd
    recompiles = {r.compile_id: r for r in capture.recompiles()}
    inputs = capture.graph_input_sizes()
    per_compile: dict[str | None, list[Step]] = {}
    for c in capture.compiles():
        where = location(c.file, c.line, cwd)
        name = friendly_function(c.function)
        base = os.path.basename(c.file or "")
        r = recompiles.get(c.compile_id)
        if r is not None:
            per_compile.setdefault(c.compile_id, []).append(Step(
                "recompile", (c.function, base, c.line, r.reason), f"recompiles {name} at {where} ({r.reason})",
                c.file, c.line, c.function))
        else:
            # The graph's input shapes are part of what must match: a different shape on one rank
            # compiles a different graph even where nothing else differs.
            sizes = inputs.get(c.compile_id) or {}
            shapes = ", ".join(f"{k} {v}" for k, v in sizes.items())
            per_compile.setdefault(c.compile_id, []).append(Step(
                "compile", (c.function, base, c.line, repr(sorted(sizes.items()))),
                f"compiles {name} at {where}" + (f" for inputs {shapes}" if shapes else ""),
                c.file, c.line, c.function))
    compiles = {c.compile_id: c for c in capture.compiles()}

    def add(compile_id: str | None, step: Step) -> None:
        per_compile.setdefault(compile_id, []).append(step)

    for cid, name in capture.cache_events():
        known = compiles.get(cid or "")
        add(cid, Step(
            "cache", (known.function if known else None, name),
            f"has {name.replace('_', ' ')} in {friendly_function(known.function) if known else cid}",
            known.file if known else None, known.line if known else None, known.function if known else None))
    for k in capture.collectives():
        known = compiles.get(k.compile_id or "")
        add(k.compile_id, Step(
            "collective", (k.op, k.group, k.shape, known.function if known else None),
            f"issues {k.op}(group {k.group}, {k.shape}) from the graph of "
            f"{friendly_function(known.function) if known else '?'} (compile {k.compile_id})",
            known.file if known else None, known.line if known else None, known.function if known else None))
    for b in capture.graph_breaks():
        loc = b.location
        known = compiles.get(b.compile_id or "")
        add(b.compile_id, Step(
            "graph_break", (b.headline, os.path.basename(loc.file or ""), loc.line),
            f"breaks at {location(loc.file, loc.line, cwd)} ({b.headline})",
            loc.file, loc.line, b.traced_function or (known.function if known else None)))
    order = list(compiles) + [cid for cid in per_compile if cid not in compiles]
    return [step for cid in order for step in per_compile.get(cid, [])]


def divergence(captures: list[Capture]) -> tuple[Divergence, ...]:
    """The first point where the ranks part, then the first per kind of step (if elsewhere)."""
    if len(captures) < 2:
        return ()
    ranks = [rank_number(c, i) for i, c in enumerate(captures)]
    steps = [rank_steps(c) for c in captures]
    collectives = [[s.key for s in ss if s.what == "collective"] for ss in steps]
    found: list[Divergence] = []
    first = _first_divergence(ranks, steps, collectives, first=True)
    if first is not None:
        found.append(first)
    for kind in KINDS:
        d = _first_divergence(ranks, [[s for s in ss if s.what == kind] for ss in steps], collectives, first=False)
        if d is not None and not (first and (d.what, d.ranks, d.file, d.line) == (first.what, first.ranks,
                                                                                   first.file, first.line)):
            found.append(d)
    return tuple(found)


def _first_divergence(ranks: list[int], steps: list[list[Step]], collectives: list[list[tuple[Any, ...]]],
                      *, first: bool) -> Divergence | None:
    for i in range(max((len(ss) for ss in steps), default=0)):
        at = [ss[i] if i < len(ss) else None for ss in steps]
        groups: dict[Any, list[int]] = {}
        for r, step in zip(ranks, at):
            groups.setdefault(step.key if step else None, []).append(r)
        if len(groups) == 1:
            continue
        # The reference is what most ranks did (ties: the group with the lowest rank).
        reference_key = max(groups, key=lambda k: (len(groups[k]), -min(groups[k])))
        parting = sorted(r for k, rs in groups.items() if k != reference_key for r in rs)
        step_of = dict(zip(ranks, at))
        mine = next((step_of[r] for r in parting if step_of[r] is not None), None)
        theirs = step_of[groups[reference_key][0]]
        shown = mine or theirs
        assert shown is not None
        who = _who(parting, len(ranks))
        others = groups[reference_key]
        if mine is not None:
            detail = f"{who} {mine.phrase}"
            detail += f", where {_who(others, len(ranks), alone=False)} {_agree(theirs.phrase, others)}" if theirs \
                else f"; {_who(others, len(ranks), alone=False)} did nothing more"
        else:
            assert theirs is not None  # no parting rank did anything: the reference did (shown is not None)
            detail = f"{who} never {_agree(theirs.phrase, parting)}"
        detail += _consequence(ranks, parting, collectives, steps)
        return Divergence(shown.what, tuple(parting), shown.file, shown.line, shown.function, detail, first)
    return None


_PLURAL = {"issues": "issue", "breaks": "break", "compiles": "compile", "recompiles": "recompile", "has": "have"}


def _agree(phrase: str, ranks: list[int]) -> str:
    """The phrase's verb for several ranks ("rank 0 issues", "ranks 0, 2 issue")."""
    if len(ranks) == 1:
        return phrase
    verb, _, rest = phrase.partition(" ")
    return f"{_PLURAL.get(verb, verb)} {rest}"


def _who(ranks: list[int], world: int, *, alone: bool = True) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}" + (" alone" if alone else "")
    if len(ranks) == world - 1 and not alone:
        return "the other ranks"
    return "ranks " + ", ".join(map(str, ranks))


def _consequence(ranks: list[int], parting: list[int], collectives: list[list[tuple[Any, ...]]],
                 steps: list[list[Step]]) -> str:
    # A recompiled graph issues its collectives again: compare which ones, not how often.
    ops = {frozenset(k[:3] for k in keys) for keys in collectives}
    if len(ops) > 1:
        return ": the ranks issue different collectives (op, group or shape): hang or wrong results"
    if len({frozenset(keys) for keys in collectives}) > 1:
        return ", so its collectives run in a different graph order: hang risk" if len(parting) == 1 \
            else ", so their collectives run in a different graph order: hang risk"
    graphs = {r: sum(1 for s in ss if s.what in ("compile", "recompile")) for r, ss in zip(ranks, steps)}
    if len(set(graphs.values())) > 1:
        counts = ", ".join(f"rank {r}: {n}" for r, n in graphs.items())
        return f", so the ranks compile different numbers of graphs ({counts})"
    return ""
