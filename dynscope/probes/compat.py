"""Every torch internal dynscope touches is looked up here, and only here.

Torch's debugging hooks are private and move between releases (see
shared/docs/torch-hooks.md). Each accessor returns None when the installed torch lacks the
hook; the probe that needs it then records a "probe unavailable" note in the capture
instead of guessing. No other module imports private torch names.
"""

from __future__ import annotations

import logging
import sys
import warnings
from typing import Any, Callable

import torch

TRACE_LOGGER_NAME = "torch.__trace"


def torch_version() -> str:
    return torch.__version__


def trace_logger() -> logging.Logger:
    return logging.getLogger(TRACE_LOGGER_NAME)


def instruction_translator_class() -> type | None:
    """The class whose ``log_graph_break(code_options, reason, exc)`` sees every graph break."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslatorBase
    except ImportError:
        return None
    return InstructionTranslatorBase if hasattr(InstructionTranslatorBase, "log_graph_break") else None


def guards_module() -> Any | None:
    """The module whose ``get_guard_fail_reason(guard_manager, code, f_locals, compile_id, ...)``
    explains every guard failure (called once per failing cache entry)."""
    try:
        import torch._dynamo.guards as guards
    except ImportError:
        return None
    return guards if hasattr(guards, "get_guard_fail_reason") else None


def graph_module_class() -> type:
    return torch.fx.GraphModule


def artifact_logger(module_qname: str, artifact: str) -> logging.Logger | None:
    """The logger torch writes an off-by-default artifact (``bytecode``, ``ir_pre_fusion``) to."""
    try:
        from torch._logging._internal import log_registry
    except ImportError:
        return None
    if artifact not in getattr(log_registry, "artifact_names", ()):
        return None
    return logging.getLogger(f"{module_qname}.__{artifact}")


def gb_id_for(gb_type: str | None) -> tuple[str | None, str | None]:
    """(GB id, documentation link) for a graph-break type, when this torch ships the registry."""
    if not gb_type:
        return None, None
    try:
        from torch._dynamo import exc
    except ImportError:
        return None, None
    gb_id = link = None
    loader = getattr(exc, "_load_gb_type_to_gb_id_map", None)
    if loader is not None:
        try:
            gb_id = loader().get(gb_type)
        except Exception:  # a damaged registry must not break the user's run
            gb_id = None
    linker = getattr(exc, "get_gbid_documentation_link", None)
    if linker is not None:
        try:
            link = linker(gb_type)
        except Exception:
            link = None
    return gb_id, link


def current_compile_id() -> tuple[str | None, int | None]:
    """(compile id, attempt) of the compile running on this thread, if any."""
    try:
        trace_id = torch._guards.CompileContext.current_trace_id()
    except Exception:
        return None, None
    if trace_id is None:
        return None, None
    return str(trace_id.compile_id), trace_id.attempt


def tracing_user_stack() -> list[Any]:
    """The user frames Dynamo is tracing right now (FrameSummary objects)."""
    try:
        return list(torch._guards.TracingContext.extract_stack())
    except Exception:
        return []


def disable_compile_caches() -> Callable[[], None]:
    """Cache hits skip most stage artifacts; a full capture needs every stage to run.
    Returns the function that restores the user's settings."""
    configs = [c for c in (torch.compiler.config, torch._inductor.config) if hasattr(c, "force_disable_caches")]
    saved = [(c, c.force_disable_caches) for c in configs]
    for config in configs:
        config.force_disable_caches = True
    # Torch then warns that profile-guided dynamic shapes are off. That warning is about
    # our switch, not the user's program: keep it off their stderr.
    warnings.filterwarnings("ignore", message="dynamo_pgo force disabled by torch.compiler.config.force_disable_caches")

    def restore() -> None:
        for config, value in saved:
            config.force_disable_caches = value

    return restore


def enable_provenance_tracking() -> tuple[str, Callable[[], None]]:
    """Turn on inductor's kernel <-> node <-> source maps. Returns (how, restore)."""
    trace = torch._inductor.config.trace
    for option, value in (("provenance_tracking_level", 1), ("provenance_tracking", True)):  # >= 2.12, ~2.8-2.9
        if hasattr(trace, option):
            saved = getattr(trace, option)
            if not saved:
                setattr(trace, option, value)
            return f"trace.{option}", lambda: setattr(trace, option, saved)
    # Torch 2.11 emits the provenance artifacts with no switch at all.
    return "default", lambda: None


def dist_rank_and_world() -> tuple[int | None, int | None]:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    return None, None


def device_summary() -> dict[str, Any]:
    """Devices the program used. Never initializes CUDA itself: that costs seconds and can
    break a program that forks afterwards."""
    info: dict[str, Any] = {"cuda": False, "triton": None}
    try:
        if torch.cuda.is_initialized():
            info.update(cuda=True, cuda_device=torch.cuda.get_device_name(), cuda_count=torch.cuda.device_count())
    except Exception:
        pass
    triton = sys.modules.get("triton")
    if triton is not None:
        info["triton"] = getattr(triton, "__version__", None)
    return info
