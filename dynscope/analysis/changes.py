"""What changed between two runs, as the lines a person reads (terminal, Markdown, HTML)."""

from __future__ import annotations

from collections import Counter

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.cache_text import comparison_cache_lines
from dynscope.analysis.compare import BACKEND_WORDS, Comparison, lookup_changes, relative, stage_seconds
from dynscope.analysis.names import first_line, friendly_function, seconds_text
from dynscope.analysis.overview import stage_label
from dynscope.analysis.run_view import run_view
from dynscope.model import Recompile

_MAX_KERNEL_NAMES = 3
_LOOKUP_CHANGE_SHOWN = 0.2  # a per-call lookup that moved less is measurement noise


def comparison_lines(result: Comparison) -> list[str]:
    """Signed lines, most important first: '+' new, '-' gone, '~' changed."""
    cwd_a, cwd_b = result.before.run.cwd, result.after.run.cwd
    lines = []
    for g in result.breaks_added:
        lines.append(f"+ graph break: {_at(g.location.file, g.location.line, cwd_b)} {_tag(g)}"
                     f"{first_line(g.headline)} (new{_times(g.count)})")
    for g in result.breaks_removed:
        lines.append(f"- graph break: {_at(g.location.file, g.location.line, cwd_a)} {_tag(g)}"
                     f"{first_line(g.headline)} (gone)")
    for m in result.breaks_moved:
        lines.append(f"~ break moved: {_at(m.before.location.file, m.before.location.line, cwd_a)} → "
                     f"{_at(m.after.location.file, m.after.location.line, cwd_b)} {_tag(m.after)}{first_line(m.after.headline)}")
    for sign, recompiles in (("+", result.recompiles_added), ("-", result.recompiles_removed)):
        for (function, guard), n in Counter((r.function, _guard(r)) for r in recompiles).items():
            lines.append(f"{sign}{n} recompile{'s' if n != 1 else ''} of {friendly_function(function)}"
                         f" (guard: {guard})")
    for sign, errors, cwd in (("+", result.errors_added, cwd_b), ("-", result.errors_removed, cwd_a)):
        for e in errors:
            lines.append(f"{sign} compile error in {friendly_function(e.function)} ({_at(e.file, e.line, cwd)}): "
                         f"{e.fail_type}")
    lines += _compile_time_lines(result)
    lines += comparison_cache_lines(result.caches)
    for c in lookup_changes(result):
        if abs(c.change) >= _LOOKUP_CHANGE_SHOWN:
            lines.append(f"~ cache lookup and guard checks of {friendly_function(c.name)}: {seconds_text(c.before_s)} → "
                         f"{seconds_text(c.after_s)} a call ({c.change:+.0%}"
                         + (", slower)" if c.change > 0 else ")"))
    for frame in result.frames:
        for k in frame["kernels"]:
            new = ", ".join(k["added"][:_MAX_KERNEL_NAMES]) + (" ..." if len(k["added"]) > _MAX_KERNEL_NAMES else "")
            where = k["after"] or k["before"]
            lines.append(f"~ kernels in {where} ({friendly_function(frame['function'])}): "
                         f"{k['count']['before']} → {k['count']['after']}" + (f" (new: {new})" if new else ""))
    if not (result.breaks_added or result.breaks_removed or result.breaks_moved or result.recompiles_added
            or result.recompiles_removed or result.errors_added or result.errors_removed):
        lines.insert(0, "  no graph break, recompile or compile error was added or removed")
    for warning in reversed(comparison_warnings(result)):  # said first: they qualify every line below
        lines.insert(0, f"  {warning}")
    return lines


def comparison_warnings(result: Comparison) -> list[str]:
    """What makes the two runs less comparable than they look: different entry scripts, different backends."""
    warnings = []
    if result.scripts.renamed:
        warnings.append(f"the entry scripts differ: {result.scripts.before} (before) → {result.scripts.after} (after); "
                        "compared as one program, the first script's places read as the second's")
    if result.backends.differ:
        b = result.backends
        warnings.append(f"the runs used different backends: {BACKEND_WORDS[b.before or '']} (before) → "
                        f"{BACKEND_WORDS[b.after or '']} (after), by the stages each compiled; "
                        "breaks, times and kernels differ by backend")
    return warnings


def _compile_time_lines(result: Comparison) -> list[str]:
    ta, tb = run_view(result.before).totals, run_view(result.after).totals
    before, after = ta.compile_time_s or 0.0, tb.compile_time_s or 0.0
    change = f" ({(after - before) / before:+.0%}" if before else " ("
    sa, sb = stage_seconds(result.before), stage_seconds(result.after)
    deltas = {k: sb.get(k, 0.0) - sa.get(k, 0.0) for k in {*sa, *sb}}
    biggest = max(deltas, key=lambda k: abs(deltas[k]), default=None)
    stage = f"{'; ' if before else ''}{stage_label(biggest)} {deltas[biggest]:+.1f} s" if biggest and abs(deltas[biggest]) >= 0.05 else ""
    detail = f"{change}{stage})" if (before or stage) else ""
    counts = f"compiles {ta.compiles} → {tb.compiles}"
    return [f"~ compile time {before:.1f} s → {after:.1f} s{detail}; {counts}"]


def _at(file: str | None, line: int | None, cwd: str | None) -> str:
    path = relative(file, cwd) or "?"
    return f"{path}:{line}" if line is not None else path


def _tag(g: BreakGroup) -> str:
    return f"[{g.gb_id}] " if g.gb_id else ""


def _times(n: int) -> str:
    return f", ×{n}" if n > 1 else ""


def _guard(r: Recompile) -> str:
    failure = r.failures[0] if r.failures else None
    if failure and failure.guard:
        return failure.guard
    return first_line(r.reason) or "?"
