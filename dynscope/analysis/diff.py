"""What changed between two stages of a compile, or between two compiles of a frame.

Nodes are matched across stages in two ways:
* lineage: torch records, on each node made by a transformation, the nodes it came from
  (``from_node``, with the id of their graph). An aten node whose ancestry reaches node ``y``
  of the earlier stage's graph was *decomposed from* ``y``;
* name: stages that share a graph (pre_grad is the Dynamo graph after passes; post_grad is
  the AOT graph after passes) keep node names, so a name present in both is the same node.
Kernels come from the output code, through the provenance the model resolved.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypedDict

from dynscope.model import Capture, FxGraph, FxNode, Guard, Stage
from dynscope.model.stages import parent_keys

# Beyond this many lines per side a text diff is unreadable and slow; say so instead.
MAX_TEXT_DIFF_LINES = 20000


@dataclass(frozen=True)
class StageDiff:
    before: Stage
    after: Stage
    structural: bool  # both stages had a recorded FX graph
    matched_by: str | None  # "lineage" | "name" | None
    kept: tuple[str, ...] = ()
    changed: tuple[tuple[str, str, str, str], ...] = ()  # (node, "op"|"shape"|"dtype", before, after)
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    decomposed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # before node -> after nodes
    fused_into: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node -> kernels computing it
    ops_before: Counter[str] = field(default_factory=Counter)
    ops_after: Counter[str] = field(default_factory=Counter)
    text_diff: tuple[str, ...] = ()
    text_note: str | None = None  # why there is no text diff, when there is none

    def op_delta(self) -> dict[str, int]:
        delta = Counter(self.ops_after)
        delta.subtract(self.ops_before)
        return {op: n for op, n in sorted(delta.items()) if n}

    def summary_lines(self) -> list[str]:
        """A few plain lines saying what the step did."""
        lines = [f"{self.before.key} → {self.after.key}"]
        if self.structural:
            lines.append(f"compute ops: {sum(self.ops_before.values())} → {sum(self.ops_after.values())}")
            for source, targets in list(self.decomposed.items())[:12]:
                if len(targets) > 1 or (targets and targets[0] != source):
                    lines.append(f"  {source} decomposed into {', '.join(targets)}")
            if len(self.decomposed) > 12:
                lines.append(f"  … {len(self.decomposed) - 12} more decomposed nodes")
            for name, what, old, new in self.changed[:12]:
                lines.append(f"  {name}: {what} {old} → {new}")
            if self.added:
                lines.append(f"  new nodes ({len(self.added)}): {_clip_list(self.added)}")
            if self.removed:
                lines.append(f"  gone ({len(self.removed)}): {_clip_list(self.removed)}")
            delta = self.op_delta()
            if delta:
                lines.append("  ops by kind: " + ", ".join(f"{op} {n:+d}" for op, n in delta.items()))
        kernels: dict[str, list[str]] = {}
        for node, ks in self.fused_into.items():
            for k in ks:
                kernels.setdefault(k, []).append(node)
        for kernel, nodes in kernels.items():
            lines.append(f"  {_clip_list(nodes)} → kernel {kernel}")
        if self.text_note:
            lines.append(f"  ({self.text_note})")
        return lines


@dataclass(frozen=True)
class GuardChange:
    kind: str
    source: str | None
    before: str | None  # the check in the older compile (None: the guard is new)
    after: str | None  # the check in the newer compile (None: the guard is gone)

    # The one wording of a guard change, for every view (dynscope diff, the TUI, the HTML report).
    @property
    def mark(self) -> str:
        """'~' changed, '+' new, '-' gone."""
        return "~" if self.before and self.after else "+" if self.after else "-"

    @property
    def subject(self) -> str:
        """'TENSOR_MATCH on L['x']'."""
        return f"{self.kind} on {self.source}" if self.source else self.kind

    def describe(self) -> str:
        """"~ TENSOR_MATCH on L['x']: <before> → <after>"."""
        checks = f"{self.before} → {self.after}" if self.mark == "~" else self.after or self.before or ""
        return f"{self.mark} {self.subject}: {checks}"


@dataclass(frozen=True)
class CompileDiff:
    compile_a: str
    compile_b: str
    graph: StageDiff | None  # Dynamo graphs of the two compiles
    guard_changes: tuple[GuardChange, ...]
    guards_a: int
    guards_b: int
    recompile_reason: str | None  # why b was compiled, when b is a recompile

    @property
    def guard_count_line(self) -> str:
        return f"guards: {self.guards_a} → {self.guards_b}"


def previous_recorded(stages: list[Stage], stage: Stage) -> Stage | None:
    """The recorded stage ``stage`` was computed from (what the stepper diffs against):
    post_grad.backward steps from aot_backward, a kernel from its graph's output code."""
    recorded = {s.key: s for s in stages if s.recorded}
    for key in parent_keys(stage.name, stage.graph):
        if key in recorded:
            return recorded[key]
    return None


def diff_stages(capture: Capture, before: Stage, after: Stage, *, before_variant: str | None = None,
                after_variant: str | None = None) -> StageDiff:
    graph_a = capture.fx_graph(before) if before_variant in (None, _main_variant(before)) else None
    graph_b = capture.fx_graph(after) if after_variant in (None, _main_variant(after)) else None
    if graph_a is not None and graph_b is not None:
        text, note = _unified(graph_a.to_text(), graph_b.to_text(), before, after, None, None), None
    else:
        text, note = _text_diff(capture, before, after, before_variant, after_variant)
    fused = _fused_into(capture, after, graph_b)
    if graph_a is None or graph_b is None:
        if after.name in ("output_code", "kernel") and graph_a is not None:
            fused = _fused_into(capture, after, graph_a)
        return StageDiff(before, after, False, None, fused_into=fused, text_diff=text, text_note=note,
                         ops_before=graph_a.op_counts() if graph_a else Counter(),
                         ops_after=graph_b.op_counts() if graph_b else Counter())
    structure = _match_nodes(graph_a, graph_b)
    return StageDiff(before, after, True, fused_into=fused, text_diff=text, text_note=note,
                     ops_before=graph_a.op_counts(), ops_after=graph_b.op_counts(), **structure)


def diff_compiles(capture: Capture, compile_a: str, compile_b: str) -> CompileDiff:
    """Graph and guard differences between two compiles (typically 0/0 and its recompile 0/1)."""
    graph = None
    stage_a = _recorded(capture, compile_a, "dynamo")
    stage_b = _recorded(capture, compile_b, "dynamo")
    if stage_a and stage_b:
        graph = diff_stages(capture, stage_a, stage_b)
    guards_a, guards_b = capture.guards(compile_a), capture.guards(compile_b)
    reason = next((r.reason for r in capture.recompiles() if r.compile_id == compile_b), None)
    return CompileDiff(compile_a, compile_b, graph, tuple(_guard_changes(guards_a, guards_b)),
                       len(guards_a), len(guards_b), reason)


# -- internals ------------------------------------------------------------------------------


def _main_variant(stage: Stage) -> str | None:
    for variant in ("graph", "after", "code", "original"):
        if variant in stage.variants:
            return variant
    return None


def _recorded(capture: Capture, compile_id: str, key: str) -> Stage | None:
    return next((s for s in capture.stages(compile_id) if s.key == key and s.recorded), None)


class _Matched(TypedDict, total=False):
    """StageDiff's node-matching fields, as _match_nodes finds them."""

    matched_by: str
    decomposed: dict[str, tuple[str, ...]]
    kept: tuple[str, ...]
    changed: tuple[tuple[str, str, str, str], ...]
    removed: tuple[str, ...]
    added: tuple[str, ...]


def _match_nodes(a: FxGraph, b: FxGraph) -> _Matched:
    compute_a = [n for n in a.nodes if n.is_compute]
    compute_b = [n for n in b.nodes if n.is_compute]
    lineage: dict[str, list[str]] = {}
    if a.graph_id is not None and a.graph_id != b.graph_id:
        for node in b.nodes:
            for origin in _origins_in(node, a):
                lineage.setdefault(origin, []).append(node.name)
    if lineage:
        matched_b = {name for names in lineage.values() for name in names}
        return {
            "matched_by": "lineage",
            "decomposed": {n.name: tuple(lineage[n.name]) for n in compute_a if n.name in lineage},
            "removed": tuple(n.name for n in compute_a if n.name not in lineage),
            "added": tuple(n.name for n in compute_b if n.name not in matched_b),
        }
    # Same graph (or no lineage): match by name, inputs included, and report what changed.
    nodes_a = [n for n in a.nodes if n.op != "output"]
    nodes_b = {n.name: n for n in b.nodes if n.op != "output"}
    changed = tuple(change for n in nodes_a if n.name in nodes_b for change in _node_changes(n, nodes_b[n.name]))
    changed_names = {c[0] for c in changed}
    names_all_a = {n.name for n in nodes_a}
    return {
        "matched_by": "name",
        "kept": tuple(n.name for n in nodes_a if n.name in nodes_b and n.name not in changed_names),
        "changed": changed,
        "removed": tuple(n.name for n in nodes_a if n.name not in nodes_b),
        "added": tuple(name for name in nodes_b if name not in names_all_a),
    }


def _node_changes(a: FxNode, b: FxNode) -> list[tuple[str, str, str, str]]:
    changes = []
    if a.target != b.target:
        changes.append((a.name, "op", a.target, b.target))
    meta_a, meta_b = a.tensor if isinstance(a.tensor, dict) else {}, b.tensor if isinstance(b.tensor, dict) else {}
    for field_name in ("shape", "dtype", "sym"):
        if meta_a.get(field_name) != meta_b.get(field_name) and (meta_a or meta_b):
            changes.append((a.name, field_name, _fmt(meta_a.get(field_name)), _fmt(meta_b.get(field_name))))
    return changes


def _fmt(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return "–" if value is None else str(value)


def _origins_in(node: FxNode, graph: FxGraph) -> list[str]:
    """The nearest ancestors of ``node`` that are nodes of ``graph``."""
    found: list[str] = []
    for ancestor in node.ancestors():
        name = ancestor.get("name")
        same_graph = ancestor.get("graph_id") in (None, graph.graph_id)
        if same_graph and name in graph.by_name and graph.by_name[name].is_compute and name not in found:
            found.append(name)
    return found[:1] if found else []


def _fused_into(capture: Capture, stage: Stage, graph: FxGraph | None) -> dict[str, tuple[str, ...]]:
    """For stages Inductor turns into kernels: which kernels compute each post-grad node."""
    if stage.name not in ("post_grad", "scheduler_ir", "output_code", "kernel"):
        return {}
    out: dict[str, list[str]] = {}
    for kernel in capture.kernels(stage.compile_id):
        if kernel.graph != stage.graph or (stage.name == "kernel" and kernel.key != stage.key):
            continue
        for node in kernel.post_grad_nodes:
            out.setdefault(node, []).append(kernel.name)
    return {node: tuple(ks) for node, ks in out.items()}


def _text_diff(capture: Capture, a: Stage, b: Stage, variant_a: str | None, variant_b: str | None
               ) -> tuple[tuple[str, ...], str | None]:
    if not (a.recorded and b.recorded):
        return (), "a stage was not recorded"
    if a.language != b.language and not (a.name == b.name and variant_a != variant_b):
        return (), f"no text diff between {a.language} and {b.language}"
    lines_a = capture.stage_text(a, variant_a).splitlines()
    lines_b = capture.stage_text(b, variant_b).splitlines()
    if max(len(lines_a), len(lines_b)) > MAX_TEXT_DIFF_LINES:
        return (), f"text too long to diff ({max(len(lines_a), len(lines_b))} lines)"
    return _unified(lines_a, lines_b, a, b, variant_a, variant_b), None


def _unified(lines_a: list[str], lines_b: list[str], a: Stage, b: Stage, variant_a: str | None,
             variant_b: str | None) -> tuple[str, ...]:
    name_a = f"{a.compile_id} {a.key}" + (f" ({variant_a})" if variant_a else "")
    name_b = f"{b.compile_id} {b.key}" + (f" ({variant_b})" if variant_b else "")
    return tuple(difflib.unified_diff(lines_a, lines_b, name_a, name_b, lineterm="", n=2))


def _guard_changes(before: list[Guard], after: list[Guard]) -> list[GuardChange]:
    def key(g: Guard) -> tuple[str, str | None]:
        return g.kind, g.source

    old: dict[tuple[str, str | None], list[str]] = {}
    new: dict[tuple[str, str | None], list[str]] = {}
    for g in before:
        old.setdefault(key(g), []).append(g.check)
    for g in after:
        new.setdefault(key(g), []).append(g.check)
    changes = []
    for k in list(dict.fromkeys([*old, *new])):
        a, b = old.get(k, []), new.get(k, [])
        only_a = [c for c in a if c not in b]
        only_b = [c for c in b if c not in a]
        for i in range(max(len(only_a), len(only_b))):
            changes.append(GuardChange(k[0], k[1], only_a[i] if i < len(only_a) else None,
                                       only_b[i] if i < len(only_b) else None))
    return changes


def _clip_list(names: Iterable[str], limit: int = 8) -> str:
    names = list(names)
    return ", ".join(names[:limit]) + (f", … ({len(names) - limit} more)" if len(names) > limit else "")
