"""The summary document: what ``dynscope summary --json`` prints and CI reads.

Its shape is a stable, documented contract (docs/summary-json.md): fields are only ever
added, and ``schema`` changes if one is ever removed or changes meaning.
"""

from __future__ import annotations

import math
from typing import Any

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.cache_text import caches_json
from dynscope.analysis.call_overhead import call_overhead_json
from dynscope.analysis.compile_time import compile_time_json
from dynscope.analysis.numerics import NumericsView
from dynscope.analysis.run_view import RunView, run_view
from dynscope.analysis.runtime import VsEager
from dynscope.model import Capture, Compile, CompileError, Kernel, Recompile, RecompileLimitHit, SkippedFrame, Stage

SCHEMA = "dynscope.summary/1"
SET_SCHEMA = "dynscope.summary-set/1"


def summary_set_document(captures: list[Capture]) -> dict[str, Any]:
    """Several captures (one per rank): each one's summary, and where the ranks diverge."""
    from dynscope.analysis.ranks import divergence, rank_number, rank_steps

    return {
        "schema": SET_SCHEMA,
        "summaries": [summary_document(run_view(c)) for c in captures],
        "divergence": [d.as_json() for d in divergence(captures)],
        "sequences": [
            {"rank": rank_number(c, i),
             "steps": [{"what": s.what, "file": s.file, "line": s.line, "function": s.function, "detail": s.phrase}
                       for s in rank_steps(c)]}
            for i, c in enumerate(captures)
        ],
    }


def summary_document(view: RunView, *, compile_time: bool = False) -> dict[str, Any]:
    """The view, serialized: every number here was derived once, by the view. ``compile_time``
    adds the optional ``compile_phases`` field (``summary --json --compile-time``)."""
    document = _summary_fields(view)
    if view.caches.shown:  # optional: absent for a run recorded with caches off (the default)
        document["caches"] = caches_json(view.caches)
    if compile_time:
        document["compile_phases"] = compile_time_json(view.compile_times, view.frame_compile_times)
    return document


def _summary_fields(view: RunView) -> dict[str, Any]:
    run = view.run
    exception = view.exception
    t = view.totals
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "capture": run.path,
        # false: the recording was cut (a full disk, a killed recorder); the numbers cover only its first part
        "complete": run.incomplete is None,
        "incomplete_reason": run.incomplete,
        "dynscope_version": run.dynscope_version,
        "torch_version": run.torch_version,
        "ranks": [{"rank": run.rank if run.rank is not None else 0, "world_size": run.world_size or 1}],
        "imported": run.imported,
        "run": {
            "command": run.command,
            "cwd": run.cwd,
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
        "compiles": [compile_json(c, view.recorded_stage_names[c.compile_id]) for c in view.compiles],
        "graph_breaks": [{**break_json(b.group), "cost_s": None if b.costing is None else b.costing.cost_s}
                         for b in view.costed_breaks],
        "recompiles": [{**recompile_json(r.recompile), "cost_s": r.cost_s, "calls": r.calls} for r in view.recompile_runtimes],
        "minify": [m.to_json() for m in view.minify_results],
        "fixes": [f.to_json() for f in view.fix_results],
        "errors": [error_json(e) for e in view.errors],
        "skipped_frames": [skipped_frame_json(f) for f in view.skipped_frames],
        "recompile_limit_hits": [recompile_limit_json(h) for h in view.recompile_limit_hits],
        "not_understood": [{"kind": kind, "count": count, "why": why}
                           for kind, (count, why) in view.not_understood.items()],
        "runtime": runtime_json(view),
        "cudagraph_skips": [{"compile_id": k.compile_id, "reason": k.reason} for k in view.cudagraph_skips],
        "autotune": [
            {"compile_id": a.compile_id, "op": a.op, "picked": a.picked, "choices_total": a.choices_total,
             "choices": [{"name": c.name, "description": c.description, "ms": c.ms} for c in a.choices]}
            for a in view.autotuning
        ],
    }
    numerics = view.numerics
    if numerics is not None:  # only when the run was checked: older captures' documents stay as they were
        document["numerics"] = numerics_json(numerics)
    return document


def numerics_json(n: NumericsView) -> dict[str, Any]:
    """What `dynscope numerics` found: the verdict, its criterion, the first suspect and the counts."""
    first = n.first_suspect
    problem = n.problem
    return {
        "verdict": n.verdict,
        "criterion": n.criterion,
        "factor": n.numerics.factor,
        "tolerance": n.numerics.tolerance,
        "reference_dtype": n.numerics.reference_dtype,
        "program_dtype": n.numerics.program_dtype,
        "graphs_checked": n.numerics.graphs_checked,
        "nodes": len(n.numerics.nodes),
        "suspects": n.suspect_count,
        "nondeterministic": n.nondeterministic_count,
        "first_suspect": None if first is None or problem is None else {
            "graph": first.graph, "direction": first.direction, "index": first.index, "node": first.node,
            "op": first.op, "kernel": first.kernel or None, "source": first.source or None,
            "file": problem.file, "line": problem.line, "function": problem.function,
            "compiled_error": _finite(first.compiled_error), "eager_error": _finite(first.eager_error),
        },
        "growth": [{"graph": g.graph, "direction": g.direction, "index": g.index, "node": g.node} for g in n.growth_nodes],
        "try": list(n.hints),
        "elapsed_s": n.numerics.elapsed_s,
    }


def _finite(value: float) -> float | None:
    """JSON has no inf or nan: null stands for them."""
    return value if math.isfinite(value) else None


def runtime_json(view: RunView) -> dict[str, Any]:
    """The measured runtime (``explain --profile``); ``{"profiled": false}`` without one."""
    profile, split = view.profile, view.time_split
    if profile is None or split is None:
        return {"profiled": False}
    return {
        "profiled": True,
        "method": profile.method,
        "complete": profile.complete,
        "wall_s": split.wall_s,
        "compiled_s": split.compiled_s,
        "eager_between_graphs_s": split.eager_between_graphs_s,
        "guard_s": split.guard_s,
        "compile_s": split.compile_s,
        "frames": [
            {
                "function": f.compile.function,
                "file": f.compile.file,
                "line": f.compile.line,
                "compile_id": f.compile.compile_id,
                "calls": f.calls,
                "compiled_s": f.compiled_s,
                "first_call_s": f.first_call_s,
                "steady_per_call_s": f.steady_per_call_s,
                "guard_s": f.guard_s,
                "share_of_frame_calls": f.share_of_frame_calls,
                "vs_eager": _vs_eager_json(f.vs_eager),
            }
            for f in view.frame_runtimes
        ],
        "entries": [
            {
                "name": r.entry.name,
                "file": r.entry.file,
                "line": r.entry.line,
                "calls": r.entry.calls,
                "compiling_calls": r.entry.compiling_calls,
                "steady_s": r.entry.seconds,
                "compiling_s": r.entry.compiling_seconds,
                "per_call_s": r.entry.per_call_s,
                "vs_eager": _vs_eager_json(r.vs_eager),
            }
            for r in view.entry_runtimes
        ],
        "vs_eager": _vs_eager_json(view.vs_eager),
        "call_overhead": call_overhead_json(view.call_overheads),
        "cudagraphs": [{"compile_id": c.compile_id, "warmups": c.warmups, "recordings": c.recordings,
                        "replays": c.replays} for c in profile.cudagraphs],
    }


def _vs_eager_json(v: VsEager | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {
        "comparable": v.comparable,
        "why_not": v.why_not,
        "compiled_per_call_s": v.compiled_per_call_s,
        "eager_per_call_s": v.eager_per_call_s,
        "speedup": v.speedup,
        "compile_s": v.compile_s,
        "break_even_calls": v.break_even_calls,
    }


# One JSON form per record, shared by every document that lists them: the summary and report JSON,
# compare and check, and the HTML report's data (which adds display fields beside these).

def compile_json(c: Compile, stages: list[str]) -> dict[str, Any]:
    """``stages``: the names of the stages recorded (Capture.recorded_stage_names)."""
    return {
        "compile_id": c.compile_id,
        "function": c.function,
        "file": c.file,
        "line": c.line,
        "status": c.status,
        "attempts": c.attempts,
        "stages": stages,
        "graph_ops": c.graph_op_count,
        "compile_time_s": c.times.total,
        "times": c.times.by_stage(),
    }


def stage_json(s: Stage) -> dict[str, Any]:
    return {
        "key": s.key,
        "name": s.name,
        "graph": s.graph,
        "recorded": s.recorded,
        "missing_reason": s.missing_reason,
        "language": s.language,
        "bytes": s.size,
        "views": sorted(s.variants),
    }


def kernel_json(k: Kernel) -> dict[str, Any]:
    return {
        "key": k.key,
        "name": k.name,
        "graph": k.graph,
        "language": k.language,
        "launch": k.launch,
        "provenance": k.provenance,
        "post_grad_nodes": list(k.post_grad_nodes),
        "origin_nodes": list(k.origin_nodes),
        "source_lines": [{"file": f.file, "line": f.line} for f in k.source_lines],
        "compile_time_s": k.compile_time_s,
    }


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
                "user_code": f.user_code,
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
