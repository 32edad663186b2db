"""JSON documents for programs (the MCP server's answers; docs/mcp.md), beside summary JSON.

Each is a stable contract like ``dynscope.summary/1`` (docs/summary-json.md): fields are only
added; ``schema`` changes if one is removed or changes meaning. Every string is the capture's
text as recorded: the caller escapes it for its medium (safe_text.json_text makes it ASCII JSON).
"""

from __future__ import annotations

from typing import Any

from dynscope.analysis.diff import CompileDiff
from dynscope.analysis.problems import Problem
from dynscope.analysis.run_view import RunView
from dynscope.analysis.summary import compile_json, stage_json
from dynscope.model import Capture, Stage

PROBLEMS_SCHEMA = "dynscope.problems/1"
STAGES_SCHEMA = "dynscope.stages/1"
STAGE_SCHEMA = "dynscope.stage/1"
DIFF_SCHEMA = "dynscope.compile-diff/1"

# A stage's text in a document: at most this many characters (an output code can be megabytes).
STAGE_TEXT_LIMIT = 200_000
GRAPH_DIFF_LIMIT = 4_000  # lines of the Dynamo graphs' text diff


def problem_json(problem: Problem) -> dict[str, Any]:
    loc = problem.location
    return {
        "kind": problem.kind,
        "title": problem.title,
        "explanation": problem.explanation,
        "hint": problem.hint,
        "file": loc.file,
        "line": loc.line,
        "function": loc.function,
        "code": loc.code,
        "count": problem.count,
        "compile_ids": list(problem.compile_ids),
        "compile_time_s": problem.compile_time_s,
        "cost_s": problem.cost_s,
        "cost_detail": problem.cost_detail,
        "calls": problem.calls,
        "fixes": list(problem.fixes),
    }


def problems_document(view: RunView) -> dict[str, Any]:
    """The run's problems, ranked as every view ranks them (dynscope.analysis.problems)."""
    return {
        "schema": PROBLEMS_SCHEMA,
        "capture": view.run.path,
        "complete": view.run.incomplete is None,
        "profiled": view.profiled,
        "problems": [problem_json(p) for p in view.problems],
        # what is wrong beyond the compiles (RunView.alerts); "clean" only when neither has anything
        "alerts": [{"kind": a.kind, "title": a.title, "detail": a.detail, "file": a.file, "line": a.line}
                   for a in view.alerts],
        "clean": view.clean,
    }


def stages_document(capture: Capture, compile_ids: list[str]) -> dict[str, Any]:
    """Each compile with every stage of its pipeline, recorded or missing (and why)."""
    return {
        "schema": STAGES_SCHEMA,
        "capture": capture.run.path,
        "compiles": [{**compile_json(c, capture.recorded_stage_names(c.compile_id)),
                      "pipeline": [stage_json(s) for s in capture.stages(c.compile_id)]}
                     for c in (capture.compile(cid) for cid in compile_ids)],
    }


def stage_document(capture: Capture, stage: Stage, view: str | None) -> dict[str, Any]:
    """One recorded stage's text (IR, code, a kernel), cut at STAGE_TEXT_LIMIT characters."""
    text = capture.stage_text(stage, view)
    return {
        "schema": STAGE_SCHEMA,
        "capture": capture.run.path,
        "compile_id": stage.compile_id,
        "stage": stage_json(stage),
        "view": view,
        "text": text[:STAGE_TEXT_LIMIT],
        "truncated": len(text) > STAGE_TEXT_LIMIT,
        "chars": len(text),
    }


def compile_diff_document(capture: Capture, diff: CompileDiff) -> dict[str, Any]:
    """Two compiles of a frame (a recompile and the compile it replaced): graph and guard changes."""
    graph = diff.graph
    return {
        "schema": DIFF_SCHEMA,
        "capture": capture.run.path,
        "compile_a": diff.compile_a,
        "compile_b": diff.compile_b,
        "recompile_reason": diff.recompile_reason,
        "graph_changed": None if graph is None else bool(graph.text_diff or graph.added or graph.removed or graph.changed),
        "graph_summary": [] if graph is None else graph.summary_lines()[1:],
        "graph_diff": [] if graph is None else list(graph.text_diff[:GRAPH_DIFF_LIMIT]),
        "graph_diff_truncated": graph is not None and len(graph.text_diff) > GRAPH_DIFF_LIMIT,
        "guards_a": diff.guards_a,
        "guards_b": diff.guards_b,
        "guard_changes": [{"mark": g.mark, "kind": g.kind, "source": g.source, "before": g.before, "after": g.after}
                          for g in diff.guard_changes],
    }
