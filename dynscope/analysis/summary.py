"""The summary document: what ``dynscope summary --json`` prints and CI reads.

Its shape is a stable, documented contract (docs/summary-json.md): fields are only ever
added, and ``schema`` changes if one is ever removed or changes meaning.
"""

from __future__ import annotations

from typing import Any

from dynscope.analysis.breaks import BreakGroup, group_breaks
from dynscope.analysis.overview import totals
from dynscope.model import Capture, CompileError, Recompile, RecompileLimitHit, SkippedFrame

SCHEMA = "dynscope.summary/1"
SET_SCHEMA = "dynscope.summary-set/1"


def summary_set_document(captures: list[Capture]) -> dict[str, Any]:
    """Several captures (one per rank): each one's summary, and where the ranks diverge."""
    from dynscope.analysis.ranks import divergence, rank_number, rank_steps

    return {
        "schema": SET_SCHEMA,
        "summaries": [summary_document(c) for c in captures],
        "divergence": [d.as_json() for d in divergence(captures)],
        "sequences": [
            {"rank": rank_number(c, i),
             "steps": [{"what": s.what, "file": s.file, "line": s.line, "function": s.function, "detail": s.phrase}
                       for s in rank_steps(c)]}
            for i, c in enumerate(captures)
        ],
    }


def summary_document(capture: Capture) -> dict[str, Any]:
    run = capture.run
    compiles = capture.compiles()
    groups = group_breaks(capture.graph_breaks())
    recompiles = capture.recompiles()
    errors = capture.errors()
    exception = capture.exception
    t = totals(capture)
    return {
        "schema": SCHEMA,
        "capture": run.path,
        "dynscope_version": run.dynscope_version,
        "torch_version": run.torch_version,
        "ranks": [{"rank": run.rank if run.rank is not None else 0, "world_size": run.world_size or 1}],
        "imported": run.imported,
        "run": {
            "command": run.command,
            "program_command": run.program_command,
            "exit_code": run.exit_code,
            "signal": run.signal,
            "ended": run.ended,
            "duration_s": run.duration_s,
            "keep_caches": run.keep_caches,
            "device": run.device,
            "exception": None if exception is None else {"type": exception.type, "message": exception.message},
        },
        "totals": {
            "frames": t.frames,
            "compiles": t.compiles,
            "graphs": t.graphs,
            "graph_breaks": t.graph_breaks,
            "distinct_graph_breaks": t.distinct_graph_breaks,
            "recompiles": t.recompiles,
            "errors": t.errors,
            "skipped_frames": t.skipped_frames,
            "recompile_limit_hits": t.recompile_limit_hits,
            "compile_time_s": t.compile_time_s,
        },
        "compiles": [
            {
                "compile_id": c.compile_id,
                "function": c.function,
                "file": c.file,
                "line": c.line,
                "status": c.status,
                "attempts": c.attempts,
                "stages": capture.recorded_stage_names(c.compile_id),
                "graph_ops": c.graph_op_count,
                "compile_time_s": c.times.total,
                "times": c.times.by_stage(),
            }
            for c in compiles
        ],
        "graph_breaks": [break_json(g) for g in groups],
        "recompiles": [recompile_json(r) for r in recompiles],
        "minify": [
            {
                "compile_id": m.compile_id,
                "kind": m.kind,
                "signature": m.signature,
                "culprit_stage": m.culprit_stage,
                "culprit_backend": m.culprit_backend,
                "culprit": m.culprit,
                "passed_backends": list(m.passed_backends),
                "subsystem": m.subsystem,
                "op": m.op,
                "repro": m.repro,
                "verified": m.verified,
                "checks_run": m.checks_run,
                "nodes_before": m.nodes_before,
                "nodes_after": m.nodes_after,
            }
            for m in capture.minify_results()
        ],
        "fixes": [
            {"kind": f.kind, "file": f.file, "line": f.line, "function": f.function, "detail": f.detail,
             "remedy": f.remedy, "applies_as": f.applies_as, "patch": f.patch, "verdict": f.verdict,
             "before": f.before, "after": f.after, "max_abs_diff": f.max_abs_diff}
            for f in capture.fix_results()
        ],
        "errors": [error_json(e) for e in errors],
        "skipped_frames": [skipped_frame_json(f) for f in capture.skipped_frames()],
        "recompile_limit_hits": [recompile_limit_json(h) for h in capture.recompile_limit_hits()],
    }


# One JSON form per record, shared by every document that lists them (summary, compare, check).

def break_json(g: BreakGroup) -> dict[str, Any]:
    return {
        "reason": g.reason,
        "headline": g.headline,
        "gb_type": g.gb_type,
        "gb_id": g.gb_id,
        "doc_link": g.doc_link,
        "explanation": g.explanation,
        "hints": list(g.hints),
        "file": g.location.file,
        "line": g.location.line,
        "function": g.location.function,
        "code": g.location.code,
        "count": g.count,
        "compile_ids": g.compile_ids,
        "resumed_into": g.resumed_into,
        "consequences": g.consequences,
        "skipped_compile_ids": g.skipped_compile_ids,
    }


def recompile_json(r: Recompile) -> dict[str, Any]:
    return {
        "function": r.function,
        "file": r.file,
        "line": r.line,
        "compile_id": r.compile_id,
        "reason": r.reason,
        "failures": [
            {
                "failed_compile_id": f.failed_compile_id,
                "guard": f.guard,
                "expected": f.expected,
                "actual": f.actual,
                "reason": f.reason,
            }
            for f in r.failures
        ],
    }


def error_json(e: CompileError) -> dict[str, Any]:
    return {
        "compile_id": e.compile_id,
        "function": e.function,
        "file": e.file,
        "line": e.line,
        "fail_type": e.fail_type,
        "reason": e.reason,
        "user_file": e.user_file,
        "user_line": e.user_line,
    }


def skipped_frame_json(f: SkippedFrame) -> dict[str, Any]:
    return {
        "compile_id": f.compile_id,
        "function": f.function,
        "file": f.file,
        "line": f.line,
        "fail_type": f.fail_type,
        "headline": f.headline,
        "reason": f.reason,
        "user_file": f.user_file,
        "user_line": f.user_line,
    }


def recompile_limit_json(h: RecompileLimitHit) -> dict[str, Any]:
    return {
        "compile_id": h.compile_id,
        "function": h.function,
        "file": h.file,
        "line": h.line,
        "limit": h.limit,
        "limit_name": h.limit_name,
        "fatal": h.fatal,
    }
