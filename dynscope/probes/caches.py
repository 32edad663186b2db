"""What the compile caches need beyond torch's own cache artifacts.

* AOTAutograd logs its cache key's details (the components that make the key) only while its
  module logger is enabled for DEBUG; the fx graph cache always logs them. With caches kept, we
  enable that logger for the run (silently: it stops propagating, so nothing reaches the user's
  stderr), so a miss can name the component that changed.
* ``torch.compiler.save_cache_artifacts`` / ``load_cache_artifacts`` (portable caches) log
  nothing: we wrap them and record each call with what its blob held.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from dynscope.events import CacheArtifactsCall, write
from dynscope.probes import compat
from dynscope.probes.sink import Sink


def log_aot_cache_keys() -> Callable[[], None] | None:
    """Enable AOTAutograd's cache-key details; returns the undo (None: this torch has no such cache)."""
    logger = compat.aot_cache_key_logger()
    if logger is None:
        return None
    if logger.isEnabledFor(logging.DEBUG):  # the user asked for these logs: leave them be
        return lambda: None
    saved_level, saved_propagate = logger.level, logger.propagate
    quiet = logging.NullHandler()  # so python's last-resort handler never prints a record
    logger.addHandler(quiet)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False

    def undo() -> None:
        logger.removeHandler(quiet)
        logger.setLevel(saved_level)
        logger.propagate = saved_propagate

    return undo


def watch_portable_caches(sink: Sink) -> Callable[[], None] | None:
    """Record every save_cache_artifacts / load_cache_artifacts call; returns the undo."""
    compiler = compat.portable_cache_functions()
    if compiler is None:
        return None
    save, load = compiler.save_cache_artifacts, compiler.load_cache_artifacts

    @functools.wraps(save)
    def save_cache_artifacts(*args: Any, **kwargs: Any) -> Any:
        result = save(*args, **kwargs)
        try:
            blob, info = result if isinstance(result, tuple) and len(result) == 2 else (None, None)
            write(sink, CacheArtifactsCall(op="save", size_bytes=len(blob) if isinstance(blob, bytes) else None,
                                           artifacts=compat.cache_info_counts(info)))
        except Exception as e:  # a probe must never disturb the user's program
            sink.note_error(f"portable caches: {type(e).__name__}: {e}")
        return result

    @functools.wraps(load)
    def load_cache_artifacts(serialized_artifacts: Any, *args: Any, **kwargs: Any) -> Any:
        result = load(serialized_artifacts, *args, **kwargs)
        try:
            size = len(serialized_artifacts) if isinstance(serialized_artifacts, bytes | bytearray) else None
            write(sink, CacheArtifactsCall(op="load", size_bytes=size, artifacts=compat.cache_info_counts(result)))
        except Exception as e:
            sink.note_error(f"portable caches: {type(e).__name__}: {e}")
        return result

    compiler.save_cache_artifacts, compiler.load_cache_artifacts = save_cache_artifacts, load_cache_artifacts

    def undo() -> None:
        compiler.save_cache_artifacts, compiler.load_cache_artifacts = save, load

    return undo
