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


def config_module(name: str) -> Any | None:
    """A torch config module by name, or None where this torch has none (torch.compiler.config
    is new in 2.7; torch.compiler does not import it as an attribute before then)."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        return None


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
    configs = [c for c in map(config_module, ("torch.compiler.config", "torch._inductor.config"))
               if c is not None and hasattr(c, "force_disable_caches")]
    saved = [(c, c.force_disable_caches) for c in configs]
    for config in configs:
        config.force_disable_caches = True
    # Torch then warns that profile-guided dynamic shapes are off. That warning is about
    # our switch, not the user's program: keep it off their stderr, without a warnings filter
    # the program could see (torch's warn_once stays silent for a message it holds).
    message = "dynamo_pgo force disabled by torch.compiler.config.force_disable_caches"
    warned = _warn_once_cache()
    ours = warned is not None and message not in warned
    if warned is None:
        warnings.filterwarnings("ignore", message=message)
    elif ours:
        warned.add(message)

    def restore() -> None:
        for config, value in saved:
            config.force_disable_caches = value
        if ours and warned is not None:
            warned.discard(message)

    return restore


def _warn_once_cache() -> set | None:
    """The messages torch._dynamo.utils.warn_once has already warned about."""
    try:
        from torch._dynamo import utils
    except ImportError:
        return None
    cache = getattr(utils, "warn_once_cache", None)
    return cache if isinstance(cache, set) else None


def keep_environment(names: tuple[str, ...] = ("TORCHINDUCTOR_CACHE_DIR",)) -> Callable[[], None]:
    """Torch writes some settings into os.environ as a side effect of imports (importing
    torch._dynamo.package sets TORCHINDUCTOR_CACHE_DIR). Call before installing probes; the
    function it returns takes back what those imports set, so the program (and its
    subprocesses) start with python's environment. Torch sets them again when it needs them."""
    import os

    before = {name: os.environ.get(name) for name in names}

    def restore() -> None:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    return restore


def enable_provenance_tracking() -> tuple[str, Callable[[], None]]:
    """Turn on inductor's kernel <-> node <-> source maps. Returns (how, restore)."""
    inductor = config_module("torch._inductor.config")
    trace = getattr(inductor, "trace", None)
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


# -- dynscope minify ------------------------------------------------------------------------
# The minifier hooks Dynamo's call into the backend, reads torch's config modules, and drives
# torch's CompilerBisector subsystems. Each lookup below answers None (or a neutral value)
# when this torch lacks it.

# Settings that dynscope itself changes while recording (see disable_compile_caches and
# enable_provenance_tracking): never reported as the user's, never put in a repro.
DYNSCOPE_OWNED_CONFIGS = {
    "torch._inductor.config": frozenset({"force_disable_caches", "trace.provenance_tracking_level",
                                         "trace.provenance_tracking"}),
    "torch.compiler.config": frozenset({"force_disable_caches"}),
}
# Config values (for patch_configs) that turn every compile cache off.
CACHES_OFF = {"torch._inductor.config": {"force_disable_caches": True},
              "torch.compiler.config": {"force_disable_caches": True}}
CONFIG_MODULES = ("torch._dynamo.config", "torch._functorch.config", "torch._inductor.config", "torch.compiler.config")


def output_graph_class() -> type | None:
    """The class whose ``call_user_compiler(gm, example_inputs)`` hands every Dynamo graph to the backend."""
    try:
        from torch._dynamo.output_graph import OutputGraph
    except ImportError:
        return None
    return OutputGraph if hasattr(OutputGraph, "call_user_compiler") else None


def describe_backend(compiler_fn: Any) -> dict[str, Any]:
    """What torch.compile was given as backend: {"name", "options", "mode", "custom", "label"}.

    ``custom`` is True for a backend defined outside torch (a function or an aot_autograd(...)
    object made by the program): only the program's own process can run it.
    """
    fn = getattr(compiler_fn, "_torchdynamo_orig_backend", compiler_fn)  # WrapBackendDebug
    name = getattr(fn, "compiler_name", None)
    if name == "inductor" and isinstance(getattr(fn, "config", None), dict):  # _TorchCompileInductorWrapper
        return {"name": "inductor", "options": dict(fn.config) or None, "mode": None, "custom": False, "label": "inductor"}
    inner = getattr(fn, "compiler_fn", fn)  # _TorchCompileWrapper
    kwargs = getattr(fn, "kwargs", None) or {}
    registered = _registered_torch_backend_name(inner)
    if registered is not None:
        return {"name": registered, "options": kwargs.get("options"), "mode": kwargs.get("mode"),
                "custom": False, "label": registered}
    if type(inner).__name__ == "AotAutograd":  # aot_autograd(fw_compiler=..., decompositions=...) of the program's
        return {"name": None, "options": None, "mode": None, "custom": True,
                "label": "aot_autograd(...) with the program's own compilers or decompositions"}
    label = getattr(inner, "__qualname__", None) or getattr(inner, "__name__", None) or type(inner).__name__
    module = getattr(inner, "__module__", None) or type(inner).__module__
    return {"name": None, "options": None, "mode": None, "custom": True, "label": f"{module}.{label}"}


def _registered_torch_backend_name(fn: Any) -> str | None:
    try:
        from torch._dynamo.backends.registry import list_backends, lookup_backend
    except ImportError:
        return None
    for name in list_backends(exclude_tags=()):
        try:
            registered = lookup_backend(name)
        except Exception:
            continue
        if registered is fn and str(getattr(registered, "__module__", "")).startswith("torch."):
            return name
    return None


def nondefault_configs() -> dict[str, dict[str, Any]]:
    """The user's non-default torch.compile settings, per config module, JSON values only
    (torch's own repro files carry the same through ``codegen_config``)."""
    import importlib

    found: dict[str, dict[str, Any]] = {}
    for module_name in CONFIG_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        values = _nondefault_values(module)
        owned = DYNSCOPE_OWNED_CONFIGS.get(module_name, frozenset())
        kept = {k: v for k, v in values.items() if k not in owned and is_json_value(v)}
        if kept:
            found[module_name] = kept
    return found


def _nondefault_values(module: Any) -> dict[str, Any]:
    ignored = list(getattr(module, "_save_config_ignore", []) or [])
    entries = getattr(module, "_config", None)
    if not isinstance(entries, dict) or not hasattr(module, "get_config_copy"):
        return {}
    get_dict = getattr(module, "_get_dict", None)
    try:
        current = dict(get_dict(ignored_keys=ignored, skip_default=True)) if get_dict else module.get_config_copy()
    except TypeError:
        current = module.get_config_copy()
    # A value put back by a config patch counts as "set" to torch; it is still the default.
    return {k: v for k, v in current.items()
            if k in entries and k not in ignored and v != getattr(entries[k], "default", not v)}


def is_json_value(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(is_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json_value(v) for k, v in value.items())
    return False


def patch_configs(configs: dict[str, dict[str, Any]]) -> Callable[[], None]:
    """Set torch config values (module name -> {key: value}) with the config modules' own
    ``patch``, so that undoing leaves them at their defaults again; returns the undo.
    Settings this torch does not have are skipped."""
    import importlib

    undo: list[Callable[[], None]] = []
    for module_name, values in configs.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        known = {k: v for k, v in values.items() if _has_config(module, k)}
        if not known:
            continue
        patcher = module.patch(known)
        patcher.__enter__()
        undo.append(lambda patcher=patcher: patcher.__exit__(None, None, None))

    def restore() -> None:
        while undo:
            undo.pop()()

    return restore


def _has_config(module: Any, key: str) -> bool:
    owner, _, attr = key.rpartition(".")
    try:
        return hasattr(_config_owner(module, owner), attr)
    except AttributeError:
        return False


def _config_owner(module: Any, dotted: str) -> Any:
    target = module
    for part in filter(None, dotted.split(".")):
        target = getattr(target, part)
    return target


def compiler_bisector_subsystems() -> dict[str, list[dict[str, Any]]] | None:
    """torch's CompilerBisector plan, backend -> subsystems in the order it tries them:
    {"name", "kind": "bisect" | "config" | "binary", and for "config": "module", "field", "value"}."""
    try:
        from torch._inductor import compiler_bisector as cb
    except ImportError:
        return None
    backends = getattr(cb, "BACKENDS", None)
    if not isinstance(backends, dict) or not hasattr(cb.CompilerBisector, "disable_subsystem"):
        return None
    plan: dict[str, list[dict[str, Any]]] = {}
    for backend, subsystems in backends.items():
        entries = []
        for sub in subsystems:
            if isinstance(sub, getattr(cb, "ConfigChange", ())):
                module = _BISECT_CONFIG_MODULES.get(sub.config_name)
                if module is not None and is_json_value(sub.config_value):
                    entries.append({"name": sub.name, "kind": "config", "module": module,
                                    "field": sub.config_field, "value": sub.config_value})
            elif isinstance(sub, getattr(cb, "BisectSubsystem", ())):
                entries.append({"name": sub.name, "kind": "bisect"})
            else:
                entries.append({"name": sub.name, "kind": "binary"})
        plan[backend] = entries
    return plan


# Which torch config module a CompilerBisector ConfigChange applies to (see
# torch/_dynamo/backends/debugging.py and _TorchCompileInductorWrapper).
_BISECT_CONFIG_MODULES = {"inductor": "torch._inductor.config", "aot_eager_decomp_partition": "torch._functorch.config"}


def install_subsystem_decider(decide: Callable[[str, str, str], bool]) -> Callable[[], None] | None:
    """Route CompilerBisector's per-application question ("skip this lowering / pass /
    decomposition?") to ``decide(backend, subsystem, what)``, where ``what`` names the
    application (the op being lowered or decomposed, or the pass). Returns the undo."""
    try:
        from torch._inductor.compiler_bisector import CompilerBisector
    except ImportError:
        return None
    original = CompilerBisector.__dict__.get("disable_subsystem")
    if original is None:
        return None

    def disable_subsystem(cls, backend: str, subsystem: str, debug_info: Callable[[], str] | None = None) -> bool:
        return decide(backend, subsystem, _application_name(debug_info))

    CompilerBisector.disable_subsystem = classmethod(disable_subsystem)

    def undo() -> None:
        CompilerBisector.disable_subsystem = original

    return undo


def _application_name(debug_info: Callable[[], str] | None) -> str:
    """torch passes ``lambda: repr(n)`` (an FX node: just its name) or ``lambda: repr(op)``;
    the node's target names the op better, so look into the closure for it."""
    for cell in getattr(debug_info, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        target = getattr(value, "target", None)
        if target is not None and not isinstance(target, str):
            return str(target)
        if isinstance(value, torch._ops.OpOverload):
            return str(value)
    try:
        return str(debug_info()) if debug_info is not None else ""
    except Exception:
        return ""


def reset_dynamo() -> None:
    torch._dynamo.reset()



def backend_fallback_exceptions() -> tuple[type[BaseException], ...]:
    """Backend exceptions Dynamo answers with a graph break rather than an error (e.g. an
    op with data-dependent output shape): expected behaviour, not failures."""
    try:
        from torch._dynamo.exc import exceptions_allowed_to_be_fallback
    except ImportError:
        return ()
    return tuple(exceptions_allowed_to_be_fallback)


def nondefault_from_dump(module_name: str, values: dict[str, Any]) -> dict[str, Any]:
    """From a full dump of one config module (compilation_metrics records them): the
    values that differ from this torch's defaults."""
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return {}
    entries = getattr(module, "_config", None)
    if not isinstance(entries, dict):
        return {}
    ignored = set(getattr(module, "_save_config_ignore", []) or []) | DYNSCOPE_OWNED_CONFIGS.get(module_name, frozenset())
    return {k: v for k, v in values.items()
            if k in entries and k not in ignored and not k.startswith("_")
            and v != getattr(entries[k], "default", v) and is_json_value(v)}


def inductor_compile(gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
    """Compile an FX graph with Inductor directly (no Dynamo), without running it."""
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


def single_threaded_compiles() -> None:
    """Compile C++/Triton in this process instead of a pool of subprocesses (a pool's reader
    threads would not survive a fork). Code generation does not depend on it."""
    if hasattr(torch._inductor.config, "compile_threads"):
        torch._inductor.config.compile_threads = 1


def cuda_initialized() -> bool:
    """Whether this process has initialized CUDA (a process that did cannot fork CUDA users)."""
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False


def synchronize_devices(values: list[Any]) -> None:
    """Wait for the GPU work of these tensors: CUDA reports a kernel's failure (a device-side
    assert) asynchronously, and it must surface inside the call that caused it."""
    if any(isinstance(v, torch.Tensor) and v.device.type == "cuda" for v in values):
        torch.cuda.synchronize()

