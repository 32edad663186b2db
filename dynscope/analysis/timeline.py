"""The compile timeline of one or more ranks, in Chrome's trace event format.

Perfetto and chrome://tracing open it. Each rank is a process (``pid`` = rank) with two
tracks: torch's own timed regions (its ``chromium_event`` B/E pairs, re-nested so that a
truncated log still gives a well-formed trace), each tagged with its compile phase
(dynamo, aot, inductor, codegen, backward), one bar per compile, and a "time by phase" track:
each compile's time given to the innermost phase that was running (dynscope.model.compile_phases),
so its slices never overlap and sum to the compile's time. Pure: a function of the model's records.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dynscope.analysis.names import friendly_function
from dynscope.model import Capture
from dynscope.model.compile_phases import PHASE_LABELS, CompilePhases

PHASE_TRACK, COMPILE_TRACK, ATTRIBUTED_TRACK = 0, 1, 2

# torch's dynamo_timed region names -> the compile phase they belong to (first match wins).
_PHASES = (
    ("backward", ("bw_compiler", "backward", "compiled_autograd")),
    ("codegen", ("code_gen", "codegen", "Codegen", "compile_file", "async_compile", "PyCodeCache", "cpp_",
                 "TritonBundler")),
    ("inductor", ("inductor", "compile_fx", "fx_codegen", "post_grad", "pre_grad", "joint_graph", "Scheduler",
                  "scheduler", "GraphLowering", "pass.", "fx_graph_cache", "additional_fake_tensor_prop")),
    ("aot", ("aot", "autograd_cache", "create_aot_dispatcher", "min_cut", "partition", "functionaliz")),
    ("dynamo", ("dynamo", "entire_frame_compile", "bytecode", "_compile", "compile_attempt", "backend_compile",
                "build_guards", "transform_code", "OutputGraph", "gc", "insert_deferred_runtime_asserts")),
)


def phase_of(name: str) -> str:
    for phase, needles in _PHASES:
        if any(n in name for n in needles):
            return phase
    return "other"


def _rank_of(capture: Capture, index: int) -> int:
    return capture.run.rank if capture.run.rank is not None else index


def timeline_events(rank: int, label: str, chromium: list[dict[str, Any]],
                    compiles: list[tuple[str, str, float | None, float | None]],
                    phases: Iterable[CompilePhases] = ()) -> list[dict[str, Any]]:
    """Trace events for one rank: ``chromium`` as torch logged it, ``compiles`` as
    (compile id, function, start in seconds, duration in seconds), ``phases`` each compile's
    time by phase."""
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": rank, "tid": PHASE_TRACK, "args": {"name": label}},
        {"name": "process_sort_index", "ph": "M", "pid": rank, "tid": PHASE_TRACK, "args": {"sort_index": rank}},
        {"name": "thread_name", "ph": "M", "pid": rank, "tid": PHASE_TRACK, "args": {"name": "compile phases"}},
        {"name": "thread_name", "ph": "M", "pid": rank, "tid": COMPILE_TRACK, "args": {"name": "compiles"}},
    ]
    stack: list[str] = []
    last_ts = 0.0
    for raw in chromium:
        name, ph, ts = raw.get("name"), raw.get("ph"), raw.get("ts")
        if not isinstance(name, str) or not isinstance(ts, (int, float)):
            continue
        last_ts = max(last_ts, float(ts))
        raw_args = raw.get("args")
        args = raw_args if isinstance(raw_args, dict) else {}
        base = {"name": name, "cat": phase_of(name), "pid": rank, "tid": PHASE_TRACK, "ts": float(ts)}
        if ph == "B":
            stack.append(name)
            events.append({**base, "ph": "B", "args": {k: v for k, v in args.items() if isinstance(v, (str, int, float))}})
        elif ph == "E":
            if name not in stack:
                continue  # its start was not logged (a log cut at the front): nothing to close
            while stack:  # close what torch left open inside it, so the nesting stays well-formed
                top = stack.pop()
                events.append({**base, "name": top, "cat": phase_of(top), "ph": "E"})
                if top == name:
                    break
        elif ph in ("i", "I"):
            events.append({**base, "ph": "i", "s": "t"})
    while stack:  # a run or log that ended inside a region
        top = stack.pop()
        events.append({"name": top, "cat": phase_of(top), "ph": "E", "pid": rank, "tid": PHASE_TRACK, "ts": last_ts})
    for compile_id, function, start, duration in compiles:
        if start is None:
            continue
        events.append({"name": f"{compile_id} {friendly_function(function)}", "cat": "compile", "ph": "X",
                       "pid": rank, "tid": COMPILE_TRACK, "ts": start * 1e6, "dur": max(0.0, (duration or 0.0) * 1e6),
                       "args": {"compile_id": compile_id}})
    attributed = [(p.compile_id, span) for p in phases for span in p.spans]
    if attributed:
        events.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": ATTRIBUTED_TRACK,
                       "args": {"name": "time by phase"}})
    for compile_id, (phase, start_us, end_us) in attributed:
        events.append({"name": PHASE_LABELS[phase], "cat": phase, "ph": "X", "pid": rank, "tid": ATTRIBUTED_TRACK,
                       "ts": start_us, "dur": max(0.0, end_us - start_us), "args": {"compile_id": compile_id}})
    return events


def timeline_document(captures: list[Capture]) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    ranks = [_rank_of(c, i) for i, c in enumerate(captures)]
    if len(set(ranks)) < len(ranks):  # the same rank twice (two runs): one process each, by position
        ranks = list(range(len(captures)))
    for i, (capture, rank) in enumerate(zip(captures, ranks)):
        label = f"rank {rank}" if capture.run.rank is not None else f"capture {i}"
        compiles = [(c.compile_id, c.function, c.started, c.times.total) for c in capture.compiles()]
        events += timeline_events(rank, label, capture.chromium_events(), compiles, capture.compile_phases().values())
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"producer": "dynscope timeline", "captures": [c.path for c in captures]}}
