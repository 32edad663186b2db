"""Two runs of one program, compared: what a refactor, a torch upgrade or a config change did.

Records are matched the way a person would match them across an edit: a graph break is the
same break when its type, file, function and source text agree, even if lines above it moved
it; recompiles, errors and frames by function, file and what failed. Paths are compared
relative to each run's directory, so two checkouts of one repository compare equal.

A renamed entry script (``train.py`` then ``train_v2.py``) is still the same program: when both
runs started a script and the scripts differ, the BEFORE run's script is compared as the AFTER
run's (its breaks, recompiles and frames match by place in it), and the comparison says the scripts
differ (``entry_scripts``). Nothing is refused: a different program simply matches nothing.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.cache_compare import CacheComparison, compare_caches
from dynscope.analysis.cache_text import cache_comparison_json
from dynscope.analysis.call_overhead import OverheadChange, overhead_changes
from dynscope.analysis.identity import BreakMatch, FrameIdentity, Place, frame_identities, match_breaks, origin_function
from dynscope.analysis.run_view import run_view
from dynscope.analysis.summary import break_json, error_json, recompile_json
from dynscope.model import Capture, Compile, CompileError, Recompile

SCHEMA = "dynscope.compare/1"
_T = TypeVar("_T")
_CodeIndex = dict[str, tuple[int, list[str]]]  # Capture.output_code_index: compile id -> (bytes, kernel names)


@dataclass(frozen=True)
class MovedBreak:
    before: BreakGroup
    after: BreakGroup


@dataclass(frozen=True)
class EntryScripts:
    """The script each run started (relative to its directory), or None for ``-m module`` or no command."""

    before: str | None
    after: str | None

    @property
    def renamed(self) -> bool:
        return self.before is not None and self.after is not None and self.before != self.after


@dataclass(frozen=True)
class Backends:
    """What each run compiled with, as the stages it recorded tell (a capture does not name the
    backend): "inductor", "aot_autograd" (AOTAutograd without Inductor: aot_eager and the like),
    "dynamo" (neither: eager or a backend of one's own); None when the run compiled nothing."""

    before: str | None
    after: str | None

    @property
    def differ(self) -> bool:
        return self.before is not None and self.after is not None and self.before != self.after


BACKEND_WORDS = {"inductor": "inductor", "aot_autograd": "aot_eager-like (AOTAutograd, no Inductor)",
                 "dynamo": "eager-like (no AOTAutograd)"}


def backend_kind(capture: Capture) -> str | None:
    stages = {name for c in capture.compiles() for name in capture.recorded_stage_names(c.compile_id)}
    if not stages:
        return None
    if stages & {"post_grad", "output_code", "scheduler_ir"}:
        return "inductor"
    if any(name.startswith("aot_") for name in stages):
        return "aot_autograd"
    return "dynamo"


@dataclass
class Comparison:
    before: Capture
    after: Capture
    breaks_added: list[BreakGroup] = field(default_factory=list)
    breaks_removed: list[BreakGroup] = field(default_factory=list)
    breaks_moved: list[MovedBreak] = field(default_factory=list)
    recompiles_added: list[Recompile] = field(default_factory=list)
    recompiles_removed: list[Recompile] = field(default_factory=list)
    errors_added: list[CompileError] = field(default_factory=list)
    errors_removed: list[CompileError] = field(default_factory=list)
    frames: list[dict[str, Any]] = field(default_factory=list)
    scripts: EntryScripts = EntryScripts(None, None)
    backends: Backends = Backends(None, None)
    caches: CacheComparison | None = None  # None: neither run logged a cache lookup (caches off)

    @property
    def regressed(self) -> bool:
        return bool(self.breaks_added or self.recompiles_added or self.errors_added)


def compare(before: Capture, after: Capture) -> Comparison:
    # Read both captures at once: SQLite, zlib and hashing release the GIL, and on a large run
    # reading is most of the time.
    with ThreadPoolExecutor(max_workers=2) as pool:
        code_a, code_b = pool.map(_read, (before, after))
    result = Comparison(before, after, scripts=EntryScripts(entry_script(before), entry_script(after)),
                        backends=Backends(backend_kind(before), backend_kind(after)))
    place = _place(result.scripts)
    frame_a, frame_b = frame_identities(_match_breaks(result, place))
    cwd_a, cwd_b = before.run.cwd, after.run.cwd
    # A recompile or an error is the same when its frame (by identity), file and what failed agree.
    # Then, among what is left, by the function a resumed frame continues: the same guard failing
    # in f's code after its last break is the same recompile when that break changed.
    result.recompiles_added, result.recompiles_removed = _difference(
        before.recompiles(), after.recompiles(),
        (lambda r: (frame_a(r.function), place(r.file, cwd_a), _guard_key(r)),
         lambda r: (frame_b(r.function), place(r.file, cwd_b), _guard_key(r))),
        (lambda r: (origin_function(r.function), place(r.file, cwd_a), _guard_key(r)),
         lambda r: (origin_function(r.function), place(r.file, cwd_b), _guard_key(r))))
    result.errors_added, result.errors_removed = _difference(
        before.errors(), after.errors(),
        (lambda e: (frame_a(e.function), place(e.file, cwd_a), e.fail_type),
         lambda e: (frame_b(e.function), place(e.file, cwd_b), e.fail_type)),
        (lambda e: (origin_function(e.function), place(e.file, cwd_a), e.fail_type),
         lambda e: (origin_function(e.function), place(e.file, cwd_b), e.fail_type)))
    result.frames = _frames(before, after, code_a, code_b, place, frame_a, frame_b)
    result.caches = compare_caches(before, after)
    return result


def entry_script(capture: Capture) -> str | None:
    """The script the run started, relative to its directory (None for ``-m module``)."""
    command = capture.run.program_command
    if not command or command[0].startswith("-"):
        return None
    cwd = capture.run.cwd
    script = command[0]
    if cwd and not os.path.isabs(script):
        script = os.path.join(cwd, script)
    return os.path.normpath(relative(script, cwd) or script)


def _place(scripts: EntryScripts) -> Place:
    """A file as the comparison names it: relative to its run's directory, and the BEFORE run's
    entry script named as the AFTER run's when they differ."""
    if not scripts.renamed:
        return relative
    alias = {scripts.before: scripts.after}

    def place(path: str | None, cwd: str | None) -> str | None:
        shown = relative(path, cwd)
        return alias.get(os.path.normpath(shown), shown) if shown else shown

    return place


def relative(path: str | None, cwd: str | None) -> str | None:
    """``path`` relative to the run's directory when inside it: the same file in two checkouts."""
    if path and cwd and os.path.isabs(path):
        rel = os.path.relpath(path, cwd)
        if not rel.startswith(".."):
            return rel
    return path


# -- graph breaks ----------------------------------------------------------------------------

def _match_breaks(result: Comparison, place: Place) -> BreakMatch:
    """Breaks matched by identity (dynscope.analysis.identity), never by line number."""
    match = match_breaks(list(run_view(result.before).break_groups), list(run_view(result.after).break_groups),
                         place, result.before.run.cwd, result.after.run.cwd)
    result.breaks_added, result.breaks_removed = match.added, match.removed
    result.breaks_moved = [MovedBreak(a, b) for a, b in match.moved]
    return match


# -- recompiles and errors ----------------------------------------------------------------

def _guard_key(r: Recompile) -> str:
    failure = r.failures[0] if r.failures else None
    return (failure.guard if failure and failure.guard else r.reason.splitlines()[0] if r.reason else "")


_Keys = tuple[Callable[[_T], Hashable], Callable[[_T], Hashable]]  # what makes an item the same: before's, after's


def _difference(before: list[_T], after: list[_T], *tiers: _Keys[_T]) -> tuple[list[_T], list[_T]]:
    """Items of ``after`` no item of ``before`` matches, and the reverse: by each tier's keys in
    turn, on what the tiers before it left."""
    added, removed = after, before
    for key_a, key_b in tiers:
        added, removed = _count_difference(removed, added, key_a, key_b)
    return added, removed


def _count_difference(before: list[_T], after: list[_T], key_a: Callable[[_T], Hashable],
                      key_b: Callable[[_T], Hashable]) -> tuple[list[_T], list[_T]]:
    """Items of ``after`` beyond ``before``'s count of the same key, and the reverse."""
    count_a = Counter(key_a(x) for x in before)
    count_b = Counter(key_b(x) for x in after)
    added: list[_T] = []
    removed: list[_T] = []
    seen: Counter[Hashable] = Counter()
    for x in after:
        k = key_b(x)
        seen[k] += 1
        if seen[k] > count_a[k]:
            added.append(x)
    seen.clear()
    for x in before:
        k = key_a(x)
        seen[k] += 1
        if seen[k] > count_b[k]:
            removed.append(x)
    return added, removed


# -- frames -----------------------------------------------------------------------------------

def _read(capture: Capture) -> _CodeIndex:
    capture.compiles(), capture.graph_breaks(), capture.recompiles(), capture.errors()
    return capture.output_code_index()


def _frames(before: Capture, after: Capture, code_a: _CodeIndex, code_b: _CodeIndex, place: Place,
            frame_a: FrameIdentity, frame_b: FrameIdentity) -> list[dict[str, Any]]:
    def by_frame(capture: Capture, frame: FrameIdentity) -> dict[tuple[Hashable, str | None], list[Compile]]:
        frames: dict[tuple[Hashable, str | None], list[Compile]] = {}
        for c in capture.compiles():
            frames.setdefault((frame(c.function), place(c.file, capture.run.cwd)), []).append(c)
        return frames

    a, b = by_frame(before, frame_a), by_frame(after, frame_b)
    rows = []
    for key in list(dict.fromkeys([*a, *b])):
        ca, cb = a.get(key, []), b.get(key, [])
        row: dict[str, Any] = {
            "function": (cb or ca)[0].function, "file": key[1],
            "compiles": {"before": len(ca), "after": len(cb)},
            "compile_time_s": {"before": _seconds(ca), "after": _seconds(cb)},
            "graph_ops": {"before": _ops(ca), "after": _ops(cb)},
            "output_code_bytes": {"before": _code_bytes(code_a, ca), "after": _code_bytes(code_b, cb)},
            "kernels": [],
        }
        for i in range(max(len(ca), len(cb))):  # the n-th compile of a frame against the n-th
            ka = code_a.get(ca[i].compile_id, (0, []))[1] if i < len(ca) else []
            kb = code_b.get(cb[i].compile_id, (0, []))[1] if i < len(cb) else []
            if ka != kb:
                row["kernels"].append({
                    "before": ca[i].compile_id if i < len(ca) else None,
                    "after": cb[i].compile_id if i < len(cb) else None,
                    "count": {"before": len(ka), "after": len(kb)},
                    "added": [k for k in kb if k not in ka], "removed": [k for k in ka if k not in kb]})
        rows.append(row)
    return rows


def _seconds(compiles: list[Compile]) -> float:
    return round(sum(c.times.total or 0.0 for c in compiles), 6)


def _ops(compiles: list[Compile]) -> int:
    return sum(c.graph_op_count or 0 for c in compiles)


def _code_bytes(index: _CodeIndex, compiles: list[Compile]) -> int:
    return sum(index.get(c.compile_id, (0, []))[0] for c in compiles)


def stage_seconds(capture: Capture) -> dict[str, float]:
    return {k: round(v, 6) for k, v in run_view(capture).totals.stage_times.items()}


# -- the document ------------------------------------------------------------------------

def comparison_document(result: Comparison) -> dict[str, Any]:
    ta, tb = run_view(result.before).totals, run_view(result.after).totals
    sa, sb = stage_seconds(result.before), stage_seconds(result.after)
    return {
        "schema": SCHEMA,
        "before": {"capture": result.before.run.path, "torch_version": result.before.run.torch_version},
        "after": {"capture": result.after.run.path, "torch_version": result.after.run.torch_version},
        "regressed": result.regressed,
        "entry_scripts": {"before": result.scripts.before, "after": result.scripts.after,
                          "renamed": result.scripts.renamed},
        "backends": {"before": result.backends.before, "after": result.backends.after,
                     "differ": result.backends.differ},
        "graph_breaks": {
            "added": [break_json(g) for g in result.breaks_added],
            "removed": [break_json(g) for g in result.breaks_removed],
            "moved": [{"before": break_json(m.before), "after": break_json(m.after)} for m in result.breaks_moved],
        },
        "recompiles": {"added": [recompile_json(r) for r in result.recompiles_added],
                       "removed": [recompile_json(r) for r in result.recompiles_removed]},
        "errors": {"added": [error_json(e) for e in result.errors_added],
                   "removed": [error_json(e) for e in result.errors_removed]},
        "totals": {k: {"before": getattr(ta, k), "after": getattr(tb, k)}
                   for k in ("compiles", "graphs", "graph_breaks", "distinct_graph_breaks", "recompiles", "errors")},
        "compile_time_s": {"before": ta.compile_time_s, "after": tb.compile_time_s,
                           "by_stage": {k: {"before": sa.get(k, 0.0), "after": sb.get(k, 0.0)}
                                        for k in dict.fromkeys([*sa, *sb])}},
        "frames": result.frames,
        "runtime": _runtime_pair(result.before, result.after),
        # optional: only where a run logged cache lookups (it kept its caches)
        **({"caches": cache_comparison_json(result.caches)} if result.caches is not None else {}),
        "call_overhead": [{"name": c.name, "lookup_per_call_s": {"before": c.before_s, "after": c.after_s}}
                          for c in lookup_changes(result)],
    }


def lookup_changes(result: Comparison) -> list[OverheadChange]:
    """The per-call cache lookup of each entry point both runs profiled (``explain --profile``)."""
    return overhead_changes(run_view(result.before).call_overheads, run_view(result.after).call_overheads)


def _runtime_pair(before: Capture, after: Capture) -> dict[str, Any] | None:
    """Where each profiled run's time went; None when neither run was profiled."""
    def split(capture: Capture) -> dict[str, float] | None:
        t = run_view(capture).time_split
        if t is None:
            return None
        return {"wall_s": t.wall_s, "compiled_s": t.compiled_s, "eager_between_graphs_s": t.eager_between_graphs_s,
                "guard_s": t.guard_s, "compile_s": t.compile_s}

    pair = {"before": split(before), "after": split(after)}
    return pair if pair["before"] or pair["after"] else None
