"""The base probe: a handler on torch's structured-trace logger.

Torch calls every handler on ``torch.__trace`` with a LogRecord whose ``metadata`` dict
names the event (its first key) and carries the compile id, and whose ``payload`` is the
artifact text. This is the same stream TORCH_TRACE writes to disk, received in-process.
"""

from __future__ import annotations

import logging
from typing import Any

from dynscope.probes.fx_graphs import GRAPH_EVENTS, PrintedGraphs
from dynscope.probes.sink import Sink


def event_name(metadata: dict[str, Any]) -> str:
    name = next(iter(metadata))
    if name == "artifact":
        return "artifact:" + str(metadata["artifact"].get("name", "?"))
    return name


def compile_id_of(metadata: dict[str, Any]) -> str | None:
    """Torch's CompileId string ("3/1", or "!0/3/1" under compiled autograd)."""
    frame, compile_ = metadata.get("frame_id"), metadata.get("frame_compile_id")
    autograd = metadata.get("compiled_autograd_id")
    frame_part = f"{frame}/{compile_}" if frame is not None and compile_ is not None else None
    if autograd is not None:
        return f"!{autograd}/{frame_part}" if frame_part else f"!{autograd}"
    return frame_part


class TraceHandler(logging.Handler):
    def __init__(self, sink: Sink, printed_graphs: PrintedGraphs) -> None:
        super().__init__(logging.DEBUG)
        self._sink = sink
        self._printed_graphs = printed_graphs

    def emit(self, record: logging.LogRecord) -> None:
        try:
            metadata = getattr(record, "metadata", None)
            if not isinstance(metadata, dict) or not metadata:
                return
            name = event_name(metadata)
            compile_id, attempt = compile_id_of(metadata), metadata.get("attempt")
            payload = getattr(record, "payload", None)
            # has_payload is torch's md5 of the payload: we hash payloads ourselves.
            kept = {k: v for k, v in metadata.items() if k != "has_payload"}
            event_id = self._sink.append(
                name, kept, payload if isinstance(payload, str) else None,
                compile_id=compile_id, attempt=attempt, ts=record.created,
            )
            if name in GRAPH_EVENTS and isinstance(payload, str):
                graph = self._printed_graphs.claim(payload)
                if graph is not None:
                    self._sink.append_json(
                        "dynscope:fx_graph", {"event_id": event_id, "stage_event": name}, graph,
                        compile_id=compile_id, attempt=attempt,
                    )
        except Exception as e:  # a probe must never disturb the user's program
            self._sink.note_error(f"trace handler: {type(e).__name__}: {e}")
