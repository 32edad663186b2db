"""Install every probe into torch at once, and take them all out again.

Importing this package imports torch; the capture reader, model and views never do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from dynscope.probes import compat
from dynscope.probes.compile_modes import watch_autotuning
from dynscope.probes.fx_graphs import PrintedGraphs, patch_print_readable
from dynscope.probes.graph_breaks import patch_log_graph_break
from dynscope.probes.guard_failures import patch_get_guard_fail_reason
from dynscope.probes.log_taps import tap_artifact_logs
from dynscope.probes.sink import Sink
from dynscope.probes.trace import TraceHandler


@dataclass
class InstalledProbes:
    """Which probes are live (recorded in the capture, so views can say what is missing)."""

    available: dict[str, bool] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    _undo: list[Callable[[], None]] = field(default_factory=list)

    def remove(self) -> None:
        while self._undo:
            self._undo.pop()()


def install_probes(sink: Sink, *, keep_caches: bool = False, profile: bool = False,
                   force_eager: bool = False) -> InstalledProbes:
    probes = InstalledProbes()
    restore_environment = compat.keep_environment()
    if force_eager:
        probes.details["forced_eager"] = compat.force_eager()

    if not keep_caches:
        probes._undo.append(compat.disable_compile_caches())
    probes.details["provenance"], restore_provenance = compat.enable_provenance_tracking()
    probes._undo.append(restore_provenance)

    printed_graphs = PrintedGraphs()
    trace_logger = compat.trace_logger()
    handler = TraceHandler(sink, printed_graphs)
    saved_level = trace_logger.level
    trace_logger.addHandler(handler)
    if trace_logger.level == logging.NOTSET or trace_logger.level > logging.DEBUG:
        trace_logger.setLevel(logging.DEBUG)

    def remove_trace_handler() -> None:
        trace_logger.removeHandler(handler)
        trace_logger.setLevel(saved_level)

    probes._undo.append(remove_trace_handler)
    probes.available["trace"] = True

    probes._undo.append(patch_print_readable(compat.graph_module_class(), printed_graphs, sink.note_error))
    probes.available["fx_graphs"] = True

    translator = compat.instruction_translator_class()
    probes.available["graph_breaks"] = translator is not None
    if translator is not None:
        probes._undo.append(patch_log_graph_break(translator, sink))

    guards = compat.guards_module()
    probes.available["guard_failures"] = guards is not None
    if guards is not None:
        probes._undo.append(patch_get_guard_fail_reason(guards, sink))

    if profile:
        from dynscope.probes.runtime import install_runtime_profiler

        profiler, undo_profiler = install_runtime_profiler(sink, forced_eager=force_eager)
        probes._undo.append(undo_profiler)
        probes.available["runtime"] = True
        probes.available["runtime:graphs"] = profiler.times_graphs

    undo_autotune = watch_autotuning(sink)
    probes.available["autotune"] = undo_autotune is not None
    if undo_autotune is not None:
        probes._undo.append(undo_autotune)

    tapped, undo_taps = tap_artifact_logs(sink)
    probes._undo.append(undo_taps)
    for artifact in ("bytecode", "ir_pre_fusion", "ir_post_fusion", "cudagraphs"):
        probes.available[f"log:{artifact}"] = artifact in tapped
    restore_environment()
    return probes
