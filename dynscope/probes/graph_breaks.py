"""Structured graph breaks, from the one method every graph break goes through.

``InstructionTranslatorBase.log_graph_break(code_options, reason, exc)`` is where torch
writes the graph-break log and the ``dynamo_graph_break_reason`` artifact, once per break
(``exc.logged`` guards against repeats). We record the same break from the live exception:
its gb_type, the message torch counts it under (``counters["graph_break"]`` keys), the
user stack as frames rather than formatted text, and the frame Dynamo was tracing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dynscope.events import BreakFrame, GraphBreakSeen, write
from dynscope.probes import compat, source_lines
from dynscope.probes.sink import Sink


def patch_log_graph_break(translator_cls: Any, sink: Sink) -> Callable[[], None]:
    original = translator_cls.log_graph_break

    def log_graph_break(self, code_options, reason, exc, *args: Any, **kwargs: Any):
        if not getattr(exc, "logged", False):
            try:
                _record(self, code_options, reason, exc, sink)
            except Exception as e:
                sink.note_error(f"graph break probe: {type(e).__name__}: {e}")
        return original(self, code_options, reason, exc, *args, **kwargs)

    log_graph_break.__wrapped__ = original  # type: ignore[attr-defined]
    translator_cls.log_graph_break = log_graph_break

    def undo() -> None:
        translator_cls.log_graph_break = original

    return undo


def _record(tx: Any, code_options: dict[str, Any], reason: str, exc: BaseException, sink: Sink) -> None:
    compile_id, attempt = compat.current_compile_id()
    gb_type = getattr(exc, "gb_type", None)
    gb_id, doc_link = compat.gb_id_for(gb_type)
    stack = [_frame(f) for f in (getattr(exc, "real_stack", None) or compat.tracing_user_stack())]
    code = getattr(tx, "f_code", None)
    seen = GraphBreakSeen(
        gb_type=gb_type,
        gb_id=gb_id,
        doc_link=doc_link,
        exception=type(exc).__name__,
        message=getattr(exc, "msg", None) or str(exc),
        reason=reason,
        user_stack=tuple(stack),
        traced_function=getattr(code, "co_name", None) or code_options.get("co_name"),
        traced_file=getattr(code, "co_filename", None) or code_options.get("co_filename"),
        traced_line=getattr(tx, "lineno", None),
        skip_frame=bool(getattr(exc, "skip_frame", False)),
    )
    write(sink, seen, compile_id=compile_id, attempt=attempt)


def _frame(summary: Any) -> BreakFrame:
    file, line = getattr(summary, "filename", None), getattr(summary, "lineno", None)
    facts = None
    if isinstance(file, str) and isinstance(line, int) and source_lines.users_file(file):
        facts = source_lines.line_facts(file, line)
    return BreakFrame(
        file=file,
        line=line,
        function=getattr(summary, "name", None),
        code=(getattr(summary, "line", None) or "").strip() or None,
        qualname=facts.qualname if facts else None,
        statement=facts.statement if facts else None,
        above=facts.above if facts else (),
        below=facts.below if facts else (),
    )
