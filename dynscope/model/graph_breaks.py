"""Graph-break records: from dynscope's probe, or (an imported TORCH_TRACE log) torch's own artifact."""

from __future__ import annotations

import re

from dynscope import events as contract
from dynscope.model.break_text import break_consequence, gb_id_from_link, parse_break_artifact, parse_break_message
from dynscope.model.reading import RecordReader
from dynscope.model.records import Compile, GraphBreak, StackFrame
from dynscope.store.reader import Event

RESUME_PREFIX = "torch_dynamo_resume_in_"
_BREAK_ARTIFACT = "artifact:dynamo_graph_break_reason"


def read_graph_breaks(records: RecordReader, compiles: dict[str, Compile], probes: dict[str, bool]) -> list[GraphBreak]:
    """Every graph break, in the order torch logged them."""
    resume_functions = [c for c in compiles.values() if c.function.startswith(RESUME_PREFIX)]
    breaks = [_from_probe(seen, event, compiles, resume_functions) for seen, event in records.records(contract.GraphBreakSeen)]
    if not breaks and probes.get("graph_breaks") is False:
        breaks = _from_log(records, compiles, resume_functions)
    return breaks


def _from_probe(seen: contract.GraphBreakSeen, event: Event, compiles: dict[str, Compile],
                resume_functions: list[Compile]) -> GraphBreak:
    message = seen.message or ""
    text = parse_break_message(message)
    stack = tuple(StackFrame(f.file, f.line, f.function, f.code, f.qualname, f.statement, f.above, f.below) for f in seen.user_stack)
    reason = seen.reason or message
    consequence, skipped = break_consequence(reason, text.chained, seen.skip_frame)
    # A chained break ("graph break in loop") is named by its root cause: the first break.
    gb_type = text.headline if text.chained else seen.gb_type
    return GraphBreak(
        event_id=event.id,
        compile_id=event.compile_id,
        attempt=event.attempt,
        gb_type=gb_type,
        gb_id=gb_id_from_link(text.doc_link) if text.chained else seen.gb_id,
        doc_link=text.doc_link if text.chained else seen.doc_link or text.doc_link,
        message=message,
        reason=reason,
        headline=gb_type or text.headline,
        explanation=text.explanation,
        hints=text.hints,
        developer_context=text.developer_context,
        user_stack=stack,
        traced_function=seen.traced_function,
        traced_line=seen.traced_line,
        resumed_into=_resume_target(event, seen.traced_line, compiles, resume_functions),
        consequence=consequence,
        frame_skipped=skipped,
    )


def _from_log(records: RecordReader, compiles: dict[str, Compile], resume_functions: list[Compile]) -> list[GraphBreak]:
    """Without dynscope's probe (an imported TORCH_TRACE log): torch's own break artifact."""
    reader = records.reader
    breaks = []
    for event in reader.events([_BREAK_ARTIFACT]):
        art = parse_break_artifact(reader.payload(event.payload_hash) or "")
        text = parse_break_message(art.message)
        # Torch's traceback reaches above the compiled frame; the break itself is its last frame.
        last: tuple[str | None, int | None, str | None, str | None] = (art.file, art.line, None, None)
        if art.stack and (art.stack[-1][0], art.stack[-1][1]) == (art.file, art.line):
            last = art.stack[-1]
        # The traceback names a resume function after its original; the probe names the frame compiled.
        compiled = compiles.get(event.compile_id or "")
        if compiled is not None and last[2] is not None and _resumed_name(compiled.function) == last[2]:
            last = (last[0], last[1], compiled.function, last[3])
        consequence, skipped = break_consequence(art.reason, text.chained, False)
        breaks.append(GraphBreak(
            event_id=event.id,
            compile_id=event.compile_id,
            attempt=event.attempt,
            gb_type=art.gb_type,
            gb_id=art.gb_id,
            doc_link=text.doc_link,
            message=art.message,
            reason=art.reason,
            headline=art.gb_type or text.headline,
            explanation=text.explanation,
            hints=text.hints,
            developer_context=text.developer_context,
            user_stack=(StackFrame(*last),),
            traced_function=last[2],
            traced_line=art.line,
            resumed_into=_resume_target(event, art.line, compiles, resume_functions),
            consequence=consequence,
            frame_skipped=skipped,
        ))
    return breaks


def _resumed_name(function: str) -> str:
    """The original function a resume function continues: torch_dynamo_resume_in_f_at_12 -> f."""
    return re.sub(r"_at_\d+$", "", function.removeprefix(RESUME_PREFIX))


def _resume_target(event: Event, traced_line: int | None, compiles: dict[str, Compile],
                   resumes: list[Compile]) -> str | None:
    """The resume function Dynamo continued in: torch names it after the frame and line."""
    if event.compile_id is None or event.compile_id not in compiles:
        return None
    root = _resumed_name(compiles[event.compile_id].function)
    exact = f"{RESUME_PREFIX}{root}_at_{traced_line}"
    candidates = [c.function for c in resumes if c.function.startswith(f"{RESUME_PREFIX}{root}_at_")]
    if exact in candidates:
        return exact
    return candidates[0] if len(set(candidates)) == 1 else None
