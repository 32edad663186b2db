"""The compile caches, explained: per compile, each cache layer's hit, miss or bypass; for a
miss, which part of the key changed since the nearest earlier entry of the same frame; and for
``explain --warm``, what the warm start saved over the cold run, frame by frame.

"The nearest earlier entry" of a miss is, among the same layer's earlier lookups of the same
frame (function and file) in this run -- or, in a warm run, the cold run's lookups of it --
the one whose key shares the most components with the miss's (a training step's forward and
backward graphs are two entries of one frame: each is compared with its own kind).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynscope.analysis.overview import compile_seconds
from dynscope.errors import CaptureError
from dynscope.events import CacheArtifactsCall, WarmStart
from dynscope.model import Capture, Compile
from dynscope.model.caches import LAYERS, CacheLayer, CacheLookup, CacheState, KeyChange, key_changes, shared_components

_CANDIDATES = 8  # earlier entries of a frame a miss is compared with (the latest ones)
_SHOWN = 72  # characters of a component's value shown before → after


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
    cold = _open_cold(capture, warm_start)
    try:
        cold_lookups = _by_frame(cold.cache_lookups(), {c.compile_id: c for c in cold.compiles()}) if cold else {}
        outcomes = _outcomes(capture.cache_lookups(), compiles, cold_lookups)
        warm = None if warm_start is None else _warm_comparison(warm_start, capture, cold)
    finally:
        if cold is not None:
            cold.close()
    return CacheReport(capture.run.keep_caches, tuple(outcomes), tuple(capture.portable_cache_calls()), warm)


def short(value: str | None, width: int = _SHOWN) -> str:
    """A component's value on one line, at most ``width`` characters ("(absent)" for None)."""
    if value is None:
        return "(absent)"
    flat = " ".join(value.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def change_text(change: KeyChange) -> str:
    """``inductor_config[comment_origin]: False → True``"""
    return f"{change.component}: {short(change.before)} → {short(change.after)}"


_Frame = tuple[str, str | None]  # (function, file name): a frame across runs and checkouts


def _frame_of(c: Compile | None) -> _Frame | None:
    return None if c is None else (c.function, os.path.basename(c.file) if c.file else None)


def _by_frame(lookups: list[CacheLookup], compiles: dict[str, Compile]) -> dict[tuple[_Frame, CacheLayer], list[CacheLookup]]:
    found: dict[tuple[_Frame, CacheLayer], list[CacheLookup]] = {}
    for lookup in lookups:
        frame = _frame_of(compiles.get(lookup.compile_id or ""))
        if frame is not None and lookup.components:
            found.setdefault((frame, lookup.layer), []).append(lookup)
    return found


def _nearest(miss: CacheLookup, candidates: list[CacheLookup]) -> CacheLookup | None:
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
        frame = _frame_of(c)
        compared_with: str | None = None
        changes: tuple[KeyChange, ...] = ()
        if frame is not None and lookup.state == "miss" and lookup.components:
            place = (frame, lookup.layer)
            nearest = _nearest(lookup, earlier.get(place, []))
            # after torch._dynamo.reset() compile ids start again: "an earlier 0/0" then
            where = None if nearest is None else (nearest.compile_id if nearest.compile_id != lookup.compile_id
                                                  else f"an earlier {nearest.compile_id}")
            if nearest is None:
                nearest = _nearest(lookup, cold.get(place, []))
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


def _open_cold(capture: Capture, warm_start: WarmStart | None) -> Capture | None:
    if warm_start is None or not warm_start.cold_capture:
        return None
    # Only a file name beside the warm capture (what --warm writes): never a path the capture picks.
    name = os.path.basename(warm_start.cold_capture)
    path = Path(capture.path).parent / name
    if not path.is_file():
        return None
    try:
        return Capture.open(str(path))
    except CaptureError:
        return None


def _compile_seconds_by_frame(capture: Capture) -> dict[_Frame, float]:
    seconds: dict[_Frame, float] = {}
    for c in capture.compiles():
        frame = _frame_of(c)
        assert frame is not None
        seconds[frame] = seconds.get(frame, 0.0) + compile_seconds(c)
    return seconds


def _warm_comparison(warm_start: WarmStart, capture: Capture, cold: Capture | None) -> WarmComparison:
    warm_s = _compile_seconds_by_frame(capture)
    cold_s = _compile_seconds_by_frame(cold) if cold is not None else {}
    names = list(dict.fromkeys([*cold_s, *warm_s]))
    frames = tuple(FrameWarmth(f[0], f[1], cold_s.get(f), warm_s.get(f)) for f in names)
    return WarmComparison(os.path.basename(warm_start.cold_capture), cold is not None, frames,
                          sum(cold_s.values()) if cold is not None else None, sum(warm_s.values()))


# -- what the views print (plain text; each view escapes it its own way) ----------------------

def counts_line(report: CacheReport) -> str:
    """``2 hits, 1 miss, 0 bypasses (aotautograd: 1 hit, ...)``"""
    def counts(layer: CacheLayer | None) -> str:  # the run's three counts; a layer's nonzero ones
        return ", ".join(f"{report.count(s, layer)} {s if report.count(s, layer) == 1 else _PLURAL[s]}" for s in
                         ("hit", "miss", "bypass") if layer is None or report.count(s, layer))
    layers = [layer for layer in LAYERS if any(o.layer == layer for o in report.outcomes)]
    return counts(None) + (" (" + "; ".join(f"{layer}: {counts(layer)}" for layer in layers) + ")" if layers else "")


_PLURAL = {"hit": "hits", "miss": "misses", "bypass": "bypasses"}


def outcome_line(o: LayerOutcome) -> str:
    """``0/1 scaled_gelu fx_graph miss: inductor_config[comment_origin]: False → True (vs 0/0)``"""
    head = f"{o.compile_id or '?'} {o.function or '?'} {o.layer} {o.state}"
    if o.state == "bypass":
        return f"{head}: {short(o.bypass_reason or 'torch gave no reason', 160)}"
    if o.state == "hit":
        return head + (f" (saved {o.saved_s:.2f} s)" if o.saved_s is not None else "")
    if o.changes:
        shown = "; ".join(change_text(ch) for ch in o.changes[:3])
        more = f"; and {len(o.changes) - 3} more" if len(o.changes) > 3 else ""
        return f"{head}: {shown}{more} (vs {o.compared_with})"
    if o.compared_with is not None:
        return f"{head}: the same key as {o.compared_with} (its entry was not in the cache)"
    if not o.key_logged:
        return f"{head}: torch logged no key details"
    return f"{head}: first compile of this frame (nothing earlier to compare)"


def warm_lines(warm: WarmComparison) -> list[str]:
    if not warm.cold_found:
        return [f"warm start: the cold run's capture {warm.cold_capture} is not beside this one"]
    lines = [f"warm start: compile {warm.cold_compile_s or 0.0:.2f} s cold → {warm.warm_compile_s:.2f} s warm "
             f"(cold run: {warm.cold_capture})"]
    for f in warm.frames:
        cold = f"{f.cold_s:.2f} s" if f.cold_s is not None else "not compiled"
        warm_s = f"{f.warm_s:.2f} s" if f.warm_s is not None else "not compiled"
        lines.append(f"  {f.function} ({f.file or '?'}): {cold} → {warm_s}")
    return lines


def portable_line(call: CacheArtifactsCall) -> str:
    held = ", ".join(f"{kind} {n}" for kind, n in sorted(call.artifacts.items())) or "nothing"
    size = f"{call.size_bytes / 1024:.0f} KiB" if call.size_bytes is not None else "no blob"
    verb = "saved" if call.op == "save" else "loaded"
    return f"portable cache artifacts {verb} ({call.op}_cache_artifacts): {size}, {held}"


def cache_lines(report: CacheReport, limit: int = 20) -> list[str]:
    """The summary's cache section, one line each (empty when there is nothing to say)."""
    if not report.shown:
        return []
    lines = [f"caches: {counts_line(report)}"]
    listed = [o for o in report.outcomes if o.state != "hit"] or list(report.outcomes)
    lines += ["  " + outcome_line(o) for o in listed[:limit]]
    if len(listed) > limit:
        lines.append(f"  … and {len(listed) - limit} more")
    lines += [portable_line(c) for c in report.portable]
    if report.warm is not None:
        lines += warm_lines(report.warm)
    return lines


def caches_json(report: CacheReport) -> dict[str, Any]:
    """The summary JSON's ``caches`` field (docs/summary-json.md); values shortened as shown."""
    warm = report.warm
    return {
        "kept": report.kept,
        "hits": report.count("hit"),
        "misses": report.count("miss"),
        "bypasses": report.count("bypass"),
        "changed_components": report.changed_components,
        "lookups": [
            {"compile_id": o.compile_id, "function": o.function, "file": o.file, "layer": o.layer, "state": o.state,
             "bypass_reason": o.bypass_reason, "saved_s": o.saved_s, "key_logged": o.key_logged,
             "compared_with": o.compared_with,
             "changes": [{"component": ch.component, "before": None if ch.before is None else short(ch.before, _JSON_SHOWN),
                          "after": None if ch.after is None else short(ch.after, _JSON_SHOWN)} for ch in o.changes]}
            for o in report.outcomes
        ],
        "portable": [{"op": c.op, "size_bytes": c.size_bytes, "artifacts": dict(c.artifacts)} for c in report.portable],
        "warm": None if warm is None else {
            "cold_capture": warm.cold_capture,
            "cold_found": warm.cold_found,
            "cold_compile_s": warm.cold_compile_s,
            "warm_compile_s": warm.warm_compile_s,
            "frames": [{"function": f.function, "file": f.file, "cold_s": f.cold_s, "warm_s": f.warm_s}
                       for f in warm.frames],
        },
    }


_JSON_SHOWN = 400


# -- two runs ----------------------------------------------------------------------------------

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
    frames_a = _by_frame(lookups_a, {c.compile_id: c for c in before.compiles()})
    compiles_b = {c.compile_id: c for c in after.compiles()}
    seen: set[tuple[str, CacheLayer, str]] = set()
    changes = []
    for lookup in lookups_b:
        frame = _frame_of(compiles_b.get(lookup.compile_id or ""))
        if frame is None or not lookup.components:
            continue
        nearest = _nearest(lookup, frames_a.get((frame, lookup.layer), []))
        if nearest is None:
            continue
        for change in key_changes(nearest.components, lookup.components):
            if (frame[0], lookup.layer, change.component) not in seen:
                seen.add((frame[0], lookup.layer, change.component))
                changes.append(ComponentChange(frame[0], lookup.layer, change))

    def counts(lookups: list[CacheLookup]) -> dict[CacheState, int]:
        return {s: sum(1 for x in lookups if x.state == s) for s in ("hit", "miss", "bypass")}

    return CacheComparison(counts(lookups_a), counts(lookups_b), tuple(changes))


def comparison_cache_lines(result: CacheComparison | None, limit: int = 12) -> list[str]:
    """compare's lines: the lookups' counts, then each key component that changed."""
    if result is None:
        return []
    def counts(c: dict[CacheState, int]) -> str:
        return ", ".join(f"{c[s]} {s if c[s] == 1 else _PLURAL[s]}" for s in ("hit", "miss", "bypass"))
    lines = [f"~ caches: {counts(result.before)} → {counts(result.after)}"]
    for c in result.changes[:limit]:
        lines.append(f"~ cache key of {c.function} ({c.layer}): {change_text(c.change)}")
    if len(result.changes) > limit:
        lines.append(f"~ … and {len(result.changes) - limit} more cache key components")
    return lines


def cache_comparison_json(result: CacheComparison) -> dict[str, Any]:
    return {
        "before": dict(result.before),
        "after": dict(result.after),
        "changed_components": result.components,
        "changes": [{"function": c.function, "layer": c.layer, "component": c.change.component,
                     "before": None if c.change.before is None else short(c.change.before, _JSON_SHOWN),
                     "after": None if c.change.after is None else short(c.change.after, _JSON_SHOWN)}
                    for c in result.changes],
    }
