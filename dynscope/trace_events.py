"""Torch's structured-trace events, as they enter a capture: ONE path for live runs and logs.

The live probe (``dynscope.probes.trace.TraceHandler``) receives each event as a LogRecord
on the ``torch.__trace`` logger; ``dynscope import`` reads the very same (metadata, payload)
pairs back from a TORCH_TRACE file. Both hand them to ``record_trace_event``, so an
imported run and an explained run are stored alike. Torch-free.
"""

from __future__ import annotations

from typing import Any

from dynscope.events import Appender


def event_name(metadata: dict[str, Any]) -> str:
    name = next(iter(metadata))
    if name == "artifact":
        artifact = metadata["artifact"]
        return "artifact:" + str(artifact.get("name", "?") if isinstance(artifact, dict) else "?")
    return name


def compile_id_of(metadata: dict[str, Any]) -> str | None:
    """Torch's CompileId string ("3/1", or "!0/3/1" under compiled autograd)."""
    frame, compile_ = metadata.get("frame_id"), metadata.get("frame_compile_id")
    autograd = metadata.get("compiled_autograd_id")
    frame_part = f"{frame}/{compile_}" if frame is not None and compile_ is not None else None
    if autograd is not None:
        return f"!{autograd}/{frame_part}" if frame_part else f"!{autograd}"
    return frame_part


def record_trace_event(sink: Appender, metadata: dict[str, Any], payload: str | None,
                       ts: float | None) -> tuple[int | None, str, str | None, Any]:
    """Store one structured-trace event; returns (event id, name, compile id, attempt)."""
    name = event_name(metadata)
    compile_id, attempt = compile_id_of(metadata), metadata.get("attempt")
    # has_payload is torch's md5 of the payload: we hash payloads ourselves.
    kept = {k: v for k, v in metadata.items() if k != "has_payload"}
    event_id = sink.append(name, kept, payload if isinstance(payload, str) else None,
                           compile_id=compile_id, attempt=attempt, ts=ts)
    return event_id, name, compile_id, attempt
