"""The compile caches, explained: per compile, each cache layer's hit, miss or bypass; for a
miss, which part of the key changed since the nearest earlier entry of the same frame; and for
``explain --warm``, what the warm start saved over the cold run, frame by frame.

"The nearest earlier entry" of a miss is, among the same layer's earlier lookups of the same
frame (function and file) in this run -- or, in a warm run, the cold run's lookups of it --
the one whose key shares the most components with the miss's (a training step's forward and
backward graphs are two entries of one frame: each is compared with its own kind).
What the views print of it: dynscope.analysis.cache_text; two runs: dynscope.analysis.cache_compare.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dynscope.analysis.overview import compile_seconds
from dynscope.errors import DynscopeError
from dynscope.events import CacheArtifactsCall, WarmStart
from dynscope.model import Capture, Compile
from dynscope.model.caches import LAYERS, CacheLayer, CacheLookup, CacheState, KeyChange, key_changes, shared_components

_CANDIDATES = 8  # earlier entries of a frame a miss is compared with (the latest ones)


@dataclass(frozen=True)
class LayerOutcome:
    """One cache layer of one compile: what the lookup found, and for a miss, why."""

    compile_id: str | None
    function: str | None
    file: str | None
    layer: CacheLayer
    state: CacheState
    bypass_reason: str | None
    saved_s: float | None
    key_logged: bool  # torch logged the key's components
    compared_with: str | None  # "0/0", or "cold run 0/0"; None: no earlier entry of the frame
    changes: tuple[KeyChange, ...]  # a miss: the components that differ from that entry


@dataclass(frozen=True)
class FrameWarmth:
    """One frame's compile seconds in the cold run and in the warm run."""

    function: str
    file: str | None
    cold_s: float | None  # None: the cold run did not compile it
    warm_s: float | None  # None: the warm run did not compile it


@dataclass(frozen=True)
class WarmComparison:
    cold_capture: str  # the file, as the warm capture names it (beside it)
    cold_found: bool  # the cold capture could be read
    frames: tuple[FrameWarmth, ...]
    cold_compile_s: float | None
    warm_compile_s: float
    cold_exit_code: int | None = None  # the cold run's exit status (not 0: what it cached may be partial)
    cold_why: str | None = None  # why a cold capture that is there was not read (a link out of dynscope mcp's root)


@dataclass(frozen=True)
class CacheReport:
    kept: bool  # the caches were on while recording
    outcomes: tuple[LayerOutcome, ...]
    portable: tuple[CacheArtifactsCall, ...]
    warm: WarmComparison | None

    def count(self, state: CacheState, layer: CacheLayer | None = None) -> int:
        return sum(1 for o in self.outcomes if o.state == state and (layer is None or o.layer == layer))

    @property
    def misses(self) -> int:
        return self.count("miss")

    @property
    def changed_components(self) -> list[str]:
        """Every key component a miss names, once, in order."""
        return list(dict.fromkeys(ch.component for o in self.outcomes for ch in o.changes))

    @property
    def shown(self) -> bool:
        """Whether there is anything to say about caches beyond "they were off"."""
        return self.kept or bool(self.outcomes or self.portable or self.warm)


def cache_report(capture: Capture) -> CacheReport:
    compiles = {c.compile_id: c for c in capture.compiles()}
    warm_start = capture.warm_start()
    cold, why = _open_cold(capture, warm_start)
    try:
        cold_lookups = by_frame(cold.cache_lookups(), {c.compile_id: c for c in cold.compiles()}) if cold else {}
        outcomes = _outcomes(capture.cache_lookups(), compiles, cold_lookups)
        warm = None if warm_start is None else _warm_comparison(warm_start, capture, cold, why)
    finally:
        if cold is not None:
            cold.close()
    return CacheReport(capture.run.keep_caches, tuple(outcomes), tuple(capture.portable_cache_calls()), warm)


_Frame = tuple[str, str | None]  # (function, file name): a frame across runs and checkouts

def frame_of(c: Compile | None) -> _Frame | None:
    return None if c is None else (c.function, os.path.basename(c.file) if c.file else None)


def by_frame(lookups: list[CacheLookup], compiles: dict[str, Compile]) -> dict[tuple[_Frame, CacheLayer], list[CacheLookup]]:
    found: dict[tuple[_Frame, CacheLayer], list[CacheLookup]] = {}
    for lookup in lookups:
        frame = frame_of(compiles.get(lookup.compile_id or ""))
        if frame is not None and lookup.components:
            found.setdefault((frame, lookup.layer), []).append(lookup)
    return found


def nearest_entry(miss: CacheLookup, candidates: list[CacheLookup]) -> CacheLookup | None:
    recent = candidates[-_CANDIDATES:]
    if not recent:
        return None
    return max(reversed(recent), key=lambda c: shared_components(c.components, miss.components))


def _outcomes(lookups: list[CacheLookup], compiles: dict[str, Compile],
              cold: dict[tuple[_Frame, CacheLayer], list[CacheLookup]]) -> list[LayerOutcome]:
    earlier: dict[tuple[_Frame, CacheLayer], list[CacheLookup]] = {}
    outcomes = []
    for lookup in lookups:
        c = compiles.get(lookup.compile_id or "")
        frame = frame_of(c)
        compared_with: str | None = None
        changes: tuple[KeyChange, ...] = ()
        if frame is not None and lookup.state == "miss" and lookup.components:
            place = (frame, lookup.layer)
            nearest = nearest_entry(lookup, earlier.get(place, []))
            # after torch._dynamo.reset() compile ids start again: "an earlier 0/0" then
            where = None if nearest is None else (nearest.compile_id if nearest.compile_id != lookup.compile_id
                                                  else f"an earlier {nearest.compile_id}")
            if nearest is None:
                nearest = nearest_entry(lookup, cold.get(place, []))
                where = f"cold run {nearest.compile_id}" if nearest else None
            if nearest is not None:
                compared_with, changes = where, tuple(key_changes(nearest.components, lookup.components))
        if frame is not None and lookup.components:
            earlier.setdefault((frame, lookup.layer), []).append(lookup)
        outcomes.append(LayerOutcome(lookup.compile_id, c.function if c else None, c.file if c else None,
                                     lookup.layer, lookup.state, lookup.bypass_reason, lookup.saved_s,
                                     bool(lookup.components), compared_with, changes))
    outcomes.sort(key=lambda o: LAYERS.index(o.layer))  # stable: per layer, in the order torch logged them
    return outcomes


def _open_cold(capture: Capture, warm_start: WarmStart | None) -> tuple[Capture | None, str | None]:
    """The cold capture, or None and why (None: it is simply not there)."""
    if warm_start is None or not warm_start.cold_capture:
        return None, None
    # Only a file name beside the warm capture (what --warm writes): never a path the capture picks.
    # Opened the way the warm one was (dynscope mcp: through its door, no link out of its root).
    name = os.path.basename(warm_start.cold_capture)
    try:
        return capture.open_beside(name), None
    except DynscopeError as e:  # CaptureError, or the door's refusal
        why = str(e)
        return None, None if why.startswith("no such capture") else why


def _compile_secondsby_frame(capture: Capture) -> dict[_Frame, float]:
    seconds: dict[_Frame, float] = {}
    for c in capture.compiles():
        frame = frame_of(c)
        assert frame is not None
        seconds[frame] = seconds.get(frame, 0.0) + compile_seconds(c)
    return seconds


def _warm_comparison(warm_start: WarmStart, capture: Capture, cold: Capture | None,
                     why: str | None = None) -> WarmComparison:
    warm_s = _compile_secondsby_frame(capture)
    cold_s = _compile_secondsby_frame(cold) if cold is not None else {}
    names = list(dict.fromkeys([*cold_s, *warm_s]))
    frames = tuple(FrameWarmth(f[0], f[1], cold_s.get(f), warm_s.get(f)) for f in names)
    return WarmComparison(os.path.basename(warm_start.cold_capture), cold is not None, frames,
                          sum(cold_s.values()) if cold is not None else None, sum(warm_s.values()),
                          warm_start.cold_exit_code, why)
