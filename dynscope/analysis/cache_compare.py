"""Two runs' compile caches compared: which key components changed between their entries of
each frame and layer (``dynscope compare``, ``check --baseline``)."""

from __future__ import annotations

from dataclasses import dataclass

from dynscope.analysis.caches import by_frame, frame_of, nearest_entry
from dynscope.model import Capture
from dynscope.model.caches import CacheLayer, CacheLookup, CacheState, KeyChange, key_changes


@dataclass(frozen=True)
class ComponentChange:
    """A key component that differs between two runs' entries of one frame and layer."""

    function: str
    layer: CacheLayer
    change: KeyChange


@dataclass(frozen=True)
class CacheComparison:
    before: dict[CacheState, int]
    after: dict[CacheState, int]
    changes: tuple[ComponentChange, ...]

    @property
    def components(self) -> list[str]:
        return list(dict.fromkeys(c.change.component for c in self.changes))


def compare_caches(before: Capture, after: Capture) -> CacheComparison | None:
    """Which key components changed between two runs (each of AFTER's entries against BEFORE's
    nearest entry of the same frame and layer); None when neither run logged a cache lookup."""
    lookups_a, lookups_b = before.cache_lookups(), after.cache_lookups()
    if not lookups_a and not lookups_b:
        return None
    frames_a = by_frame(lookups_a, {c.compile_id: c for c in before.compiles()})
    compiles_b = {c.compile_id: c for c in after.compiles()}
    seen: set[tuple[str, CacheLayer, str]] = set()
    changes = []
    for lookup in lookups_b:
        frame = frame_of(compiles_b.get(lookup.compile_id or ""))
        if frame is None or not lookup.components:
            continue
        nearest = nearest_entry(lookup, frames_a.get((frame, lookup.layer), []))
        if nearest is None:
            continue
        for change in key_changes(nearest.components, lookup.components):
            if (frame[0], lookup.layer, change.component) not in seen:
                seen.add((frame[0], lookup.layer, change.component))
                changes.append(ComponentChange(frame[0], lookup.layer, change))

    def counts(lookups: list[CacheLookup]) -> dict[CacheState, int]:
        return {s: sum(1 for x in lookups if x.state == s) for s in ("hit", "miss", "bypass")}

    return CacheComparison(counts(lookups_a), counts(lookups_b), tuple(changes))
