"""Shrink a failing graph while it keeps failing the same way.

Cheapest first, each step kept only if the failure signature stays the same:
1. Op screening: one node of each distinct op, each fed by fresh inputs shaped like the
   values it read, in one small graph. Most compiler bugs live in one op: if this graph
   fails, halving it finds the op in about log2(#ops) checks of tiny graphs.
2. Otherwise (the failure needs ops together): binary search for the shortest prefix of the
   graph that still fails, returning every value later nodes needed from it; then try its
   last node alone; then delta debugging (ddmin) over the rest, turning what the kept nodes
   read from dropped ones into inputs.
3. Inputs: cut every input dimension to a few elements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeGuard

from dynscope.minifier.checker import Checker
from dynscope.minifier.fragment import Fragment, can_stand_alone, keep_only, prefix, with_small_inputs

_SMALL_SIZES = (2, 8)
_MAX_DDMIN_CHECKS = 60


def minimize(checker: Checker, fragment: Fragment, *, on_step: Callable[[str, Fragment], None]) -> Fragment | None:
    """The smallest graph found that fails like the target; None when the whole graph does
    not fail that way (the failure does not replay)."""
    def fails(candidate: Fragment | None) -> TypeGuard[Fragment]:  # a None candidate never fails
        return candidate is not None and checker.fails(candidate)

    on_step("one node per op", fragment)
    best = _screen_ops(fragment, fails, on_step)
    if best is None:
        on_step("whole graph", fragment)
        if not fails(fragment):
            return None
        on_step("prefix", fragment)
        best = _shortest_failing_prefix(fragment, fails, on_step)
        last = best.compute_nodes[-1]["name"] if best.compute_nodes else None
        if last is not None and len(best.compute_nodes) > 1:
            on_step("last node alone", best)
            alone = keep_only(best, {last})
            if fails(alone):
                best = alone
            else:
                on_step("delta debugging", best)
                best = _ddmin(best, last, fails, on_step)
    for size in _SMALL_SIZES:
        smaller = with_small_inputs(best, size)
        if smaller is None:
            break
        on_step(f"inputs of size {size}", best)
        if fails(smaller):
            best = smaller
            break
    return best


def _screen_ops(fragment: Fragment, fails: Callable[[Fragment | None], TypeGuard[Fragment]],
                on_step: Callable[[str, Fragment], None]) -> Fragment | None:
    """The smallest set of single, separately fed nodes (one per distinct op) that fails."""
    representatives: dict[str, str] = {}
    for node in fragment.compute_nodes:
        if node["target"] not in representatives and can_stand_alone(fragment, node["name"]):
            representatives[node["target"]] = node["name"]
    candidates = list(representatives.values())
    if len(candidates) < 2 or not fails(keep_only(fragment, set(candidates))):
        return None
    while len(candidates) > 1:
        half = len(candidates) // 2
        for part in (candidates[:half], candidates[half:]):
            subgraph = keep_only(fragment, set(part))
            if fails(subgraph):
                candidates = part
                on_step("one node per op", subgraph)
                break
        else:
            break  # the failure needs nodes from both halves
    return keep_only(fragment, set(candidates))


def _shortest_failing_prefix(fragment: Fragment, fails: Callable[[Fragment | None], TypeGuard[Fragment]],
                             on_step: Callable[[str, Fragment], None]) -> Fragment:
    count = len(fragment.compute_nodes)
    low, high = 1, count  # the whole graph (high) is known to fail
    best = fragment
    while low < high:
        middle = (low + high) // 2
        candidate = prefix(fragment, middle)
        if fails(candidate):
            high, best = middle, candidate
            on_step("prefix", best)
        else:
            low = middle + 1
    if high < count and best is fragment:
        best = prefix(fragment, high) or fragment
    return best


def _ddmin(fragment: Fragment, keep_last: str, fails: Callable[[Fragment | None], TypeGuard[Fragment]],
           on_step: Callable[[str, Fragment], None]) -> Fragment:
    """Zeller's ddmin over the compute nodes other than ``keep_last``: try removing each
    chunk (and keeping only each chunk), refining the chunks when nothing goes."""
    current = [n["name"] for n in fragment.compute_nodes if n["name"] != keep_last]
    best = fragment
    chunks = 2
    checks = 0
    while current and checks < _MAX_DDMIN_CHECKS:
        size = max(1, len(current) // chunks)
        parts = [current[i:i + size] for i in range(0, len(current), size)]
        reduced = False
        for part in parts:
            for kept in (part, [n for n in current if n not in part]):
                if len(kept) >= len(current):
                    continue
                candidate = keep_only(fragment, {*kept, keep_last})
                checks += 1
                if fails(candidate):
                    current, best, reduced = kept, candidate, True
                    on_step("delta debugging", best)
                    break
            if reduced or checks >= _MAX_DDMIN_CHECKS:
                break
        if reduced:
            chunks = max(chunks - 1, 2)
        elif size == 1:
            break
        else:
            chunks = min(chunks * 2, len(current))
    if not current:
        alone = keep_only(fragment, {keep_last})
        return alone if alone is not None else best
    return best
