"""Compile and frame records, from torch's dynamo_start events and compilation metrics."""

from __future__ import annotations

import dataclasses
import os
import runpy

from dynscope import events as contract
from dynscope.model.reading import FieldRow, RecordReader
from dynscope.model.records import Compile, CompileStatus, CompileTimes, Frame, StackFrame

_DYNSCOPE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def interned_files(records: RecordReader) -> dict[int, str]:
    """torch's table of interned file names: index -> path."""
    return {entry.index: entry.path for entry, _ in records.records(contract.InternedString)}


def read_compiles(records: RecordReader, files: dict[int, str]) -> dict[str, Compile]:
    """Every compile the capture records, by compile id, in the order torch started them."""
    starts: dict[str, list[tuple[FieldRow, contract.DynamoStart]]] = {}
    for row, start in records.rows(contract.DynamoStart):
        if row.compile_id is not None:
            starts.setdefault(row.compile_id, []).append((row, start))
    metrics: dict[str, tuple[FieldRow, contract.CompilationMetrics]] = {}
    for row, m in records.rows(contract.CompilationMetrics):
        if (cid := m.compile_id or row.compile_id) is not None:
            metrics[cid] = (row, m)
    backward: dict[str, contract.BackwardMetrics] = {}
    for row, b in records.rows(contract.BackwardMetrics):
        if (cid := b.compile_id or row.compile_id) is not None:
            backward[cid] = b

    def first_row(cid: str) -> int:
        return starts[cid][0][0].id if cid in starts else metrics[cid][0].id

    compiles = {cid: _build_compile(cid, starts.get(cid, []), metrics[cid][1] if cid in metrics else None,
                                    backward.get(cid), files)
                for cid in sorted(set(starts) | set(metrics), key=first_row)}
    return _named_by_frame(compiles)


def frames_of(compiles: dict[str, Compile]) -> list[Frame]:
    """The compiled frames (code objects), each with its compiles in order."""
    grouped: dict[int | str, list[Compile]] = {}
    for c in compiles.values():
        grouped.setdefault(c.frame_id if c.frame_id is not None else c.compile_id, []).append(c)
    return [
        Frame(cs[0].frame_id, cs[0].function, cs[0].file, cs[0].line, tuple(c.compile_id for c in cs))
        for cs in grouped.values()
    ]


def _build_compile(cid: str, starts: list[tuple[FieldRow, contract.DynamoStart]],
                   m: contract.CompilationMetrics | None, bwd: contract.BackwardMetrics | None,
                   files: dict[int, str]) -> Compile:
    stack = _user_stack(starts[0][1].stack, files) if starts else ()
    restarts = m.restart_reasons if m else None
    frame_id, frame_compile_id = _split_compile_id(cid)
    status: CompileStatus
    if m is None:
        status, m = "incomplete", contract.CompilationMetrics()
    elif m.fail_type:
        status = "failed"
    elif m.has_guarded_code is False:
        status = "skipped"
    else:
        status = "ok"
    if restarts is not None:  # each graph break restarts the analysis; torch lists why in restart_reasons
        attempts = len(restarts) + 1
    else:
        attempts = max((row.attempt or 0) for row, _ in starts) + 1 if starts else 1
    return Compile(
        compile_id=cid,
        frame_id=frame_id,
        frame_compile_id=frame_compile_id,
        attempts=attempts,
        function=m.co_name or (stack[-1].function if stack else None) or "?",
        file=m.co_filename or (stack[-1].file if stack else None),
        line=m.co_firstlineno or (stack[-1].line if stack else None),
        status=status,
        fail_type=m.fail_type,
        fail_reason=m.fail_reason,
        fail_file=m.fail_user_frame_filename,
        fail_line=m.fail_user_frame_lineno,
        started=m.start_time or (starts[0][0].ts if starts else None),
        times=_compile_times(m, bwd),
        graph_op_count=m.graph_op_count,
        graph_node_count=m.graph_node_count,
        guard_count=m.guard_count,
        restart_reasons=tuple(restarts or ()),
        user_stack=stack,
        guard_latency_s=m.guard_latency_us / 1e6 if m.guard_latency_us is not None else None,
        cudagraph_skip_reason=m.cudagraph_skip_reason,
    )


def _user_stack(raw: tuple[contract.TraceFrame, ...], files: dict[int, str]) -> tuple[StackFrame, ...]:
    frames = [StackFrame(_file_name(f.filename, files), f.line, f.name, f.loc) for f in raw]
    # The stack starts in dynscope's runner (runpy, our child process): not the user's code.
    while frames and _is_runner_frame(frames[0].file):
        frames.pop(0)
    return tuple(frames)


def _file_name(filename: int | str | None, files: dict[int, str]) -> str:
    found = files.get(filename) if isinstance(filename, int) else None
    return found if found is not None else str(filename)


def _is_runner_frame(path: str | None) -> bool:
    if not path:
        return False
    return path.startswith("<frozen runpy") or path.startswith(_DYNSCOPE_DIR) or path == runpy.__file__


def _named_by_frame(compiles: dict[str, Compile]) -> dict[str, Compile]:
    """A compile that failed before Dynamo looked at the code (the recompile limit) has no name
    in torch's metrics: it is the same code object as the other compiles of its frame."""
    named = {c.frame_id: c for c in compiles.values() if c.function != "?" and c.frame_id is not None}
    for cid, c in compiles.items():
        sibling = named.get(c.frame_id) if c.frame_id is not None else None
        if c.function == "?" and sibling is not None:
            compiles[cid] = dataclasses.replace(c, function=sibling.function, file=c.file or sibling.file,
                                                line=c.line or sibling.line)
    return compiles


def _split_compile_id(cid: str) -> tuple[int | None, int | None]:
    parts = cid.lstrip("!").split("/")
    try:
        return int(parts[-2]), int(parts[-1])
    except (IndexError, ValueError):
        return None, None


def _compile_times(m: contract.CompilationMetrics, bwd: contract.BackwardMetrics | None) -> CompileTimes:
    total = m.entire_frame_compile_time_s
    backend = m.backend_compile_time_s
    inductor = m.inductor_compile_time_s
    codegen = m.code_gen_time_s
    backward_us = (bwd.backward_cumulative_compile_time_us or bwd.duration_us) if bwd else None

    def diff(a: float | None, b: float | None) -> float | None:
        return None if a is None else max(a - (b or 0.0), 0.0)

    return CompileTimes(
        total=total,
        dynamo=diff(total, backend),
        aot_autograd=diff(backend, inductor),
        inductor=diff(inductor, codegen),
        codegen=codegen,
        backward=backward_us / 1e6 if backward_us else None,
    )
