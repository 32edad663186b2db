"""The compile caches as the views print them: plain lines (each view escapes them its own way)
and the JSON of the summary and of compare (docs/summary-json.md)."""

from __future__ import annotations

from typing import Any

from dynscope.analysis.cache_compare import CacheComparison
from dynscope.analysis.caches import CacheReport, LayerOutcome, WarmComparison
from dynscope.events import CacheArtifactsCall
from dynscope.model.caches import LAYERS, CacheLayer, CacheState, KeyChange

_SHOWN = 72  # characters of a component's value shown before → after
_JSON_SHOWN = 400


def short(value: str | None, width: int = _SHOWN) -> str:
    """A component's value on one line, at most ``width`` characters ("(absent)" for None)."""
    if value is None:
        return "(absent)"
    flat = " ".join(value.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def change_text(change: KeyChange) -> str:
    """``inductor_config[comment_origin]: False → True``"""
    return f"{change.component}: {short(change.before)} → {short(change.after)}"


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
    if not warm.cold_found and warm.cold_why:
        return [f"warm start: the cold run's capture {warm.cold_capture} was not read: {warm.cold_why}"]
    if not warm.cold_found:
        return [f"warm start: the cold run's capture {warm.cold_capture} is not beside this one"]
    failed = f"; the cold run exited {warm.cold_exit_code}" if warm.cold_exit_code else ""
    lines = [f"warm start: compile {warm.cold_compile_s or 0.0:.2f} s cold → {warm.warm_compile_s:.2f} s warm "
             f"(cold run: {warm.cold_capture}{failed})"]
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
            "cold_why": warm.cold_why,
            "cold_exit_code": warm.cold_exit_code,
            "cold_compile_s": warm.cold_compile_s,
            "warm_compile_s": warm.warm_compile_s,
            "frames": [{"function": f.function, "file": f.file, "cold_s": f.cold_s, "warm_s": f.warm_s}
                       for f in warm.frames],
        },
    }


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
