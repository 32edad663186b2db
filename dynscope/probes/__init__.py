"""Install every probe into torch at once, and take them all out again.

Importing this package imports torch; the capture reader, model and views never do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from dynscope.probes import compat
from dynscope.probes.caches import log_aot_cache_keys, watch_portable_caches
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
                   force_eager: bool = False, cache_keys: bool = True) -> InstalledProbes:
    """Install what this torch allows. A probe that cannot install is recorded as unavailable,
    with why, and the others (and the user's program) go on: never hide the run.
    ``cache_keys``: with caches kept, have AOTAutograd log its cache-key details (bench/cache_keys.py
    measures that against False)."""
    probes = InstalledProbes()
    restore_environment = compat.keep_environment()
    if force_eager:
        probes.details["forced_eager"] = compat.force_eager()

    def attempt(name: str, install: Callable[[], bool | None]) -> None:
        try:
            ok = install()
        except Exception as e:  # a torch whose internals moved: degrade, say what is missing
            probes.available[name] = False
            probes.details[name] = f"could not install on torch {compat.torch_version()}: {type(e).__name__}: {e}"
            sink.note_error(f"probe {name}: {probes.details[name]}")
            return
        if ok is not None:
            probes.available[name] = bool(ok)

    if not keep_caches:
        attempt("caches_off", lambda: probes._undo.append(compat.disable_compile_caches()))
    elif cache_keys:
        def aot_cache_keys() -> bool:
            undo = log_aot_cache_keys()
            if undo is not None:
                probes._undo.append(undo)
            return undo is not None

        attempt("cache_keys", aot_cache_keys)

    def portable_caches() -> bool:
        undo = watch_portable_caches(sink)
        if undo is not None:
            probes._undo.append(undo)
        return undo is not None

    attempt("portable_caches", portable_caches)

    def provenance() -> None:
        probes.details["provenance"], restore_provenance = compat.enable_provenance_tracking()
        probes._undo.append(restore_provenance)

    attempt("provenance", provenance)

    printed_graphs = PrintedGraphs()

    def trace() -> bool:
        trace_logger = compat.trace_logger()
        handler = TraceHandler(sink, printed_graphs)
        saved_level, saved_propagate = trace_logger.level, trace_logger.propagate
        trace_logger.addHandler(handler)
        if trace_logger.level == logging.NOTSET or trace_logger.level > logging.DEBUG:
            trace_logger.setLevel(logging.DEBUG)
        # torch never lets its trace propagate, but a logging config that names the "torch" logger
        # (dictConfig resets its children) turns propagation back on: at our DEBUG level every trace
        # event would then reach the root logger's handlers (a test report, the program's log files).
        trace_logger.propagate = False

        def remove_trace_handler() -> None:
            trace_logger.removeHandler(handler)
            trace_logger.setLevel(saved_level)
            trace_logger.propagate = saved_propagate

        probes._undo.append(remove_trace_handler)
        return True

    attempt("trace", trace)

    def fx_graphs() -> bool:
        probes._undo.append(patch_print_readable(compat.graph_module_class(), printed_graphs, sink.note_error))
        return True

    attempt("fx_graphs", fx_graphs)

    def graph_breaks() -> bool:
        translator = compat.instruction_translator_class()
        if translator is not None:
            probes._undo.append(patch_log_graph_break(translator, sink))
        return translator is not None

    attempt("graph_breaks", graph_breaks)

    def guard_failures() -> bool:
        guards = compat.guards_module()
        if guards is not None:
            probes._undo.append(patch_get_guard_fail_reason(guards, sink))
        return guards is not None

    attempt("guard_failures", guard_failures)

    if profile:
        def runtime() -> bool:
            from dynscope.probes.runtime import install_runtime_profiler

            profiler, undo_profiler = install_runtime_profiler(sink, forced_eager=force_eager)
            probes._undo.append(undo_profiler)
            probes.available["runtime:graphs"] = profiler.times_graphs
            return True

        attempt("runtime", runtime)

    def autotune() -> bool:
        undo_autotune = watch_autotuning(sink)
        if undo_autotune is not None:
            probes._undo.append(undo_autotune)
        return undo_autotune is not None

    attempt("autotune", autotune)

    def artifact_logs() -> None:
        tapped, undo_taps = tap_artifact_logs(sink)
        probes._undo.append(undo_taps)
        for artifact in ("bytecode", "ir_pre_fusion", "ir_post_fusion", "cudagraphs"):
            probes.available[f"log:{artifact}"] = artifact in tapped

    attempt("artifact_logs", artifact_logs)
    restore_environment()
    return probes
