"""Find things in a capture by text: graph-break and recompile reasons, compile errors, FX
node names and ops, kernel names.

Run-wide records (breaks, recompiles, errors) are searched in one go; per-compile records
(FX nodes, kernels) one compile at a time, because reading them means decompressing that
compile's graphs and output code. A view can therefore search a large capture progressively
(``search_run``, then ``search_compile`` for each compile id) and stop whenever it likes.
Matching is a case-insensitive substring test: what a person types into a search box.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from dynscope.analysis.names import first_line, friendly_function, location
from dynscope.analysis.run_view import run_view
from dynscope.model import Capture, StackFrame


@dataclass(frozen=True)
class Hit:
    kind: str  # "graph_break" | "recompile" | "error" | "node" | "kernel"
    label: str  # one line: what matched
    compile_id: str | None
    stage_key: str | None = None  # the stage holding the node, or the kernel's stage key
    name: str | None = None  # the node or kernel name
    event_id: int | None = None  # a graph break: the event id of the group's first occurrence
    location: StackFrame | None = None  # where in the user's code, when known


def search(capture: Capture, query: str) -> Iterator[Hit]:
    """Every hit, run-wide records first, then compile by compile in capture order."""
    yield from search_run(capture, query)
    for c in capture.compiles():
        yield from search_compile(capture, c.compile_id, query)


def search_run(capture: Capture, query: str) -> list[Hit]:
    """Graph-break groups, recompiles and compile errors whose text contains ``query``."""
    needle = query.strip().lower()
    if not needle:
        return []
    cwd = capture.run.cwd
    hits = []
    view = run_view(capture)
    for g in view.break_groups:
        if _matches(needle, g.headline, g.gb_type, g.gb_id, g.reason, g.explanation, *g.hints, g.location.code):
            hits.append(Hit("graph_break", f"{g.headline} ({location(g.location.file, g.location.line, cwd)})",
                            g.first.compile_id, event_id=g.first.event_id, location=g.location))
    for r in view.recompiles:
        texts = [text for f in r.failures for text in (f.reason, f.guard, f.user_code)]
        if _matches(needle, r.reason, *texts):
            hits.append(Hit("recompile", f"{r.compile_id} {friendly_function(r.function)}: {first_line(r.reason)}",
                            r.compile_id, location=StackFrame(r.file, r.line, r.function)))
    for e in view.errors:
        if _matches(needle, e.fail_type, e.reason):
            hits.append(Hit("error", f"{e.compile_id} {e.fail_type}: {first_line(e.reason)}", e.compile_id,
                            location=StackFrame(e.user_file or e.file, e.user_line or e.line, e.function)))
    return hits


def search_compile(capture: Capture, compile_id: str, query: str) -> list[Hit]:
    """FX nodes (by name, op or target) of every recorded graph stage, and kernels (by name), of one compile."""
    needle = query.strip().lower()
    if not needle:
        return []
    hits = []
    for stage in capture.stages(compile_id):
        if not stage.recorded or stage.structure_hash is None:
            continue
        graph = capture.fx_graph(stage)
        for node in graph.nodes if graph is not None else ():
            if node.op != "output" and _matches(needle, node.name, node.op_kind, node.target):
                what = node.target if node.is_compute else node.op
                hits.append(Hit("node", f"{compile_id} {stage.key}: {node.name} = {what}", compile_id,
                                stage_key=stage.key, name=node.name, location=node.user_frame))
    for kernel in capture.kernels(compile_id):
        if _matches(needle, kernel.name):
            hits.append(Hit("kernel", f"{compile_id} {kernel.name} ({kernel.language})", compile_id,
                            stage_key=kernel.key, name=kernel.name,
                            location=kernel.source_lines[0] if kernel.source_lines else None))
    return hits


def definition_line(text: str, name: str) -> int | None:
    """The 1-based line of a stage's printed graph where node ``name`` is defined
    (``name = ...`` or ``name: "f32[4]" = ...``), else the first line that mentions it."""
    defines = re.compile(rf"^\s*{re.escape(name)}\s*[:=]")
    mentions = re.compile(rf"\b{re.escape(name)}\b")
    first_mention = None
    for number, line in enumerate(text.splitlines(), 1):
        if defines.match(line):
            return number
        if first_mention is None and mentions.search(line):
            first_mention = number
    return first_mention


def _matches(needle: str, *texts: str | None) -> bool:
    return any(text and needle in text.lower() for text in texts)
