"""The base probe: a handler on torch's structured-trace logger.

Torch calls every handler on ``torch.__trace`` with a LogRecord whose ``metadata`` dict
names the event (its first key) and carries the compile id, and whose ``payload`` is the
artifact text. This is the same stream TORCH_TRACE writes to disk, received in-process.
"""

from __future__ import annotations

import logging

from dynscope.events import FxGraphStructure
from dynscope.probes.fx_graphs import GRAPH_EVENTS, PrintedGraphs
from dynscope.probes.sink import Sink
from dynscope.trace_events import record_trace_event


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
            payload = getattr(record, "payload", None)
            event_id, name, compile_id, attempt = record_trace_event(self._sink, metadata, payload, record.created)
            if name in GRAPH_EVENTS and isinstance(payload, str):
                graph = self._printed_graphs.claim(payload)
                if graph is not None:
                    self._sink.append_json(
                        FxGraphStructure.KIND, FxGraphStructure(event_id, name).to_metadata(), graph,
                        compile_id=compile_id, attempt=attempt,
                    )
        except Exception as e:  # a probe must never disturb the user's program
            self._sink.note_error(f"trace handler: {type(e).__name__}: {e}")
