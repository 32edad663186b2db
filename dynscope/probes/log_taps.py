"""Stages torch only writes to its (off by default) artifact logs, not to the structured trace.

* ``bytecode``: Dynamo's original and modified bytecode of every frame (the trace only has
  it for resume functions);
* ``ir_pre_fusion`` / ``ir_post_fusion``: Inductor's scheduler IR;
* ``cudagraphs``: why CUDA graphs were skipped (``mode="reduce-overhead"``).

We attach a handler and lower the logger's level for the run. If the user had not asked
for the artifact, the logger stops propagating meanwhile, so nothing reaches their stderr.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from dynscope.events import log_tap_kind
from dynscope.probes import compat
from dynscope.probes.sink import Sink

# (module that owns the logger, artifact name, level torch logs it at)
TAPPED_ARTIFACTS = (
    ("torch._dynamo.convert_frame", "bytecode", logging.DEBUG),
    ("torch._inductor.debug", "ir_pre_fusion", logging.INFO),
    ("torch._inductor.debug", "ir_post_fusion", logging.INFO),
    # mode="reduce-overhead": why CUDA graphs were skipped, at compile time or at a later call
    ("torch._inductor.cudagraph_utils", "cudagraphs", logging.WARNING),
)


class _TapHandler(logging.Handler):
    def __init__(self, artifact: str, sink: Sink) -> None:
        super().__init__(logging.DEBUG)
        self._artifact = artifact
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            compile_id, attempt = compat.current_compile_id()
            self._sink.append(
                log_tap_kind(self._artifact), {}, record.getMessage(), compile_id=compile_id, attempt=attempt
            )
        except Exception as e:
            self._sink.note_error(f"{self._artifact} log tap: {type(e).__name__}: {e}")


def tap_artifact_logs(sink: Sink) -> tuple[list[str], Callable[[], None]]:
    """Install the taps; returns (artifacts tapped, undo)."""
    undos: list[Callable[[], None]] = []
    tapped: list[str] = []
    for module, artifact, level in TAPPED_ARTIFACTS:
        logger = compat.artifact_logger(module, artifact)
        if logger is None:
            continue
        handler = _TapHandler(artifact, sink)
        user_enabled = logger.isEnabledFor(level)
        saved_level, saved_propagate = logger.level, logger.propagate
        logger.addHandler(handler)
        if not user_enabled:
            logger.setLevel(level)
            logger.propagate = False

        def undo(logger=logger, handler=handler, user_enabled=user_enabled,
                 saved_level=saved_level, saved_propagate=saved_propagate) -> None:
            logger.removeHandler(handler)
            if not user_enabled:
                logger.setLevel(saved_level)
                logger.propagate = saved_propagate

        undos.append(undo)
        tapped.append(artifact)

    def undo_all() -> None:
        for undo in reversed(undos):
            undo()

    return tapped, undo_all
