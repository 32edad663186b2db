"""Every torch internal dynscope touches is looked up here, and only here.

Torch's debugging hooks are private and move between releases (the events they feed are
listed in dynscope/events.py). Each accessor returns None when the installed torch lacks the
hook; the probe that needs it then records a "probe unavailable" note in the capture
instead of guessing. No other module imports private torch names.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

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
    stop_keeping = keep_kernel_builds_for_tests(in_named_directory=True)
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
        stop_keeping()
        if ours and warned is not None:
            warned.discard(message)

    return restore


# AOTAutograd computes its cache key's details (one line per component, as the fx graph cache
# always does) only while this logger is enabled for DEBUG.
AOT_CACHE_KEY_LOGGER = "torch._functorch._aot_autograd.autograd_cache"


def aot_cache_key_logger() -> logging.Logger | None:
    """The logger whose DEBUG level makes AOTAutograd log its cache-key details, or None where
    this torch has no AOTAutograd cache."""
    try:
        import torch._functorch._aot_autograd.autograd_cache as autograd_cache
    except ImportError:
        return None
    return autograd_cache.log if isinstance(getattr(autograd_cache, "log", None), logging.Logger) else None


def portable_cache_functions() -> Any | None:
    """The module holding ``save_cache_artifacts`` / ``load_cache_artifacts`` (torch.compiler,
    2.7+), or None."""
    compiler = getattr(torch, "compiler", None)
    if compiler is None or not all(callable(getattr(compiler, n, None))
                                   for n in ("save_cache_artifacts", "load_cache_artifacts")):
        return None
    return compiler


def cache_info_counts(info: Any) -> dict[str, int]:
    """torch.compiler's CacheInfo (``artifacts``: artifact type -> keys) as type -> how many."""
    artifacts = getattr(info, "artifacts", None)
    if not isinstance(artifacts, dict):
        return {}
    return {str(kind): len(keys) for kind, keys in artifacts.items() if isinstance(keys, list | tuple)}
# The test suite's one knob on what a recorded run does (CONTRIBUTING.md, "Test-only settings").
KEEP_KERNEL_BUILDS_FOR_TESTS = "DYNSCOPE_TEST_KEEP_KERNEL_BUILDS"


def keep_kernel_builds_for_tests(*, in_named_directory: bool = False) -> Callable[[], None]:
    """Only where the environment has DYNSCOPE_TEST_KEEP_KERNEL_BUILDS (tests/conftest.py sets it):
    Inductor's kernel builds (C++ libraries, their precompiled header, Python modules) stay in one
    directory from one compile and run to the next, instead of going to a fresh directory per
    compile, so gcc does not build the same kernel again in every test. They stay in
    TORCHINDUCTOR_CACHE_DIR; with ``in_named_directory`` (a recording with caches off, which
    explain --cold runs in a fresh private cache directory), in the directory the setting names
    (the test session's) when it names one rather than saying ``1``. The force_disable_caches switch
    stays on: the FX graph, AOTAutograd, PGO and autotune caches are still off and every stage
    still runs and is recorded; only kernel compile times get shorter.
    Returns the function that stops waiting for Inductor's import (the replacement stays)."""
    import os

    value = os.environ.get(KEEP_KERNEL_BUILDS_FOR_TESTS)
    if not value:
        return lambda: None
    keep_in = os.path.abspath(value) if in_named_directory and value != "1" else None

    @contextlib.contextmanager
    def builds_in_kept_directory() -> Iterator[None]:
        if keep_in is None:
            yield
            return
        saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = keep_in  # as torch's fresh_cache sets it, for the compile
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved

    def install(compile_fx: Any) -> None:
        if hasattr(compile_fx, "with_fresh_cache_if_config"):  # torch >= 2.2: a fresh cache per compile
            compile_fx.with_fresh_cache_if_config = builds_in_kept_directory

    return _on_import("torch._inductor.compile_fx", install) or (lambda: None)


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
            return f"trace.{option}", lambda option=option, saved=saved: setattr(trace, option, saved)
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
                                         "trace.provenance_tracking", "generate_intermediate_hooks"}),
    "torch.compiler.config": frozenset({"force_disable_caches"}),
}
# Config values (for patch_configs) that turn every compile cache off.
CACHES_OFF = {"torch._inductor.config": {"force_disable_caches": True},
              "torch.compiler.config": {"force_disable_caches": True}}
CONFIG_MODULES = ("torch._dynamo.config", "torch._functorch.config", "torch._inductor.config", "torch.compiler.config")


def output_graph_class() -> Any:
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
        undo.append(functools.partial(patcher.__exit__, None, None, None))

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
    # torch's subsystem classes (absent ones match nothing)
    config_change: Any = getattr(cb, "ConfigChange", ())
    bisect_subsystem: Any = getattr(cb, "BisectSubsystem", ())
    for backend, subsystems in backends.items():
        entries = []
        for sub in subsystems:
            if isinstance(sub, config_change):
                module = _BISECT_CONFIG_MODULES.get(sub.config_name)
                if module is not None and is_json_value(sub.config_value):
                    entries.append({"name": sub.name, "kind": "config", "module": module,
                                    "field": sub.config_field, "value": sub.config_value})
            elif isinstance(sub, bisect_subsystem):
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
            and v != _as_recorded(getattr(entries[k], "default", v)) and is_json_value(v)}


def _as_recorded(value: Any) -> Any:
    """A default as a dump records it in JSON: tuples as lists, sets as sorted lists."""
    if isinstance(value, (tuple, list)):
        return [_as_recorded(v) for v in value]
    if isinstance(value, (set, frozenset)):
        try:
            return sorted(_as_recorded(v) for v in value)
        except TypeError:
            return value
    return value


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


def gpu_present() -> bool:
    """Whether this torch sees a CUDA (or ROCm) device, asked the way that creates no CUDA
    context: torch.cuda.device_count() asks NVML (AMD SMI on ROCm) before CUDA's runtime and
    never initializes torch.cuda. (If NVML cannot answer, the runtime's answer may already have
    made forking unsafe: the fork server then finds out with a forked test child.)"""
    try:
        return torch.cuda.device_count() > 0
    except Exception:
        return False


# Modules a GPU compile imports, imported up front by the fork server instead of an actual
# compile: Inductor's first compile registers its pattern-matcher patterns traced on "cuda"
# whenever a GPU is present (fx_passes/{pad_mm,fuse_attention,misc_patterns}.py), which
# initializes CUDA, and its tf32 warning reads the device's capability.
COMPILER_MODULES = (
    "torch._dynamo", "torch._functorch.aot_autograd", "torch._inductor.compile_fx", "torch._inductor.graph",
    "torch._inductor.lowering", "torch._inductor.decomposition", "torch._inductor.scheduler",
    "torch._inductor.pattern_matcher", "torch._inductor.fx_passes.joint_graph", "torch._inductor.fx_passes.post_grad",
    "torch._inductor.fx_passes.fuse_attention", "torch._inductor.fx_passes.pad_mm", "torch._inductor.async_compile",
    "torch._inductor.codegen.wrapper", "torch._inductor.codegen.simd", "torch._inductor.codegen.triton",
    "torch._inductor.codegen.cuda_combined_scheduling", "torch._inductor.runtime.triton_heuristics",
    "torch._inductor.runtime.triton_helpers", "triton", "triton.language", "triton.compiler.compiler",
    "triton.runtime.jit",
)


def import_compiler_modules() -> list[str]:
    """Import what compiling for a GPU imports, creating no CUDA context; the names that failed."""
    import importlib

    failed = []
    for name in COMPILER_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # not in this torch, or no Triton: the compile imports what it needs
            failed.append(name)
    return failed


def cuda_smoke_test() -> None:
    """Create a CUDA context and run a kernel on it (raises where CUDA does not work)."""
    x = torch.ones(4, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()


def synchronize_devices(values: list[Any]) -> None:
    """Wait for the GPU work of these tensors: CUDA reports a kernel's failure (a device-side
    assert) asynchronously, and it must surface inside the call that caused it."""
    if any(isinstance(v, torch.Tensor) and v.device.type == "cuda" for v in values):
        torch.cuda.synchronize()



# -- runtime profile (explain --profile) -------------------------------------------------------


def any_cuda_tensor(values: Any) -> bool:
    return any(isinstance(v, torch.Tensor) and v.is_cuda for v in values)


def cuda_event() -> Any:
    """A timing event recorded now on the current CUDA stream."""
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def synchronize_cuda() -> None:
    if cuda_initialized():
        torch.cuda.synchronize()


def compile_attempts() -> int:
    """How many frames Dynamo has tried to compile so far (cache hits don't count)."""
    try:
        return torch._dynamo.utils.counters["frames"]["total"]
    except Exception:
        return 0


def patch_torch_compile(wrap: Callable[[Any, Any], Any]) -> Callable[[], None]:
    """Make ``torch.compile`` pass what it returns through ``wrap(compiled, original)``
    (also when used as ``@torch.compile(...)`` with options, and by ``Module.compile``)."""
    original_compile = torch.compile

    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:
            return lambda m: compile(m, **kwargs)
        compiled = original_compile(model, **kwargs)
        return compiled if compiled is model else wrap(compiled, model)

    compile.__wrapped__ = original_compile  # type: ignore[attr-defined]
    compile.__doc__ = original_compile.__doc__
    torch.compile = compile

    def undo() -> None:
        if torch.compile is compile:
            torch.compile = original_compile

    return undo


def describe_compiled_target(target: Any) -> tuple[str, str | None, int | None, str]:
    """(name, file, line, "module" | "function") of what was given to torch.compile."""
    owner = getattr(target, "__self__", None)
    if isinstance(owner, torch.nn.Module):  # Module.compile() compiles its bound _call_impl
        target = owner
    if isinstance(target, torch.nn.Module):
        forward = getattr(type(target), "forward", None)
        code = getattr(forward, "__code__", None)
        return (f"{type(target).__qualname__}.forward", getattr(code, "co_filename", None),
                getattr(code, "co_firstlineno", None), "module" if target is not owner else "function")
    code = getattr(getattr(target, "__func__", target), "__code__", None)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or type(target).__name__
    return name, getattr(code, "co_filename", None), getattr(code, "co_firstlineno", None), "function"


def cache_lookup_timer(target: Any) -> Callable[[tuple[Any, ...], dict[str, Any]], int | None] | None:
    """A replay of Dynamo's cache lookup for a call of ``target`` (what torch.compile was given):
    called with the call's arguments, it checks the guards of the frame's cache entries in
    Dynamo's order (most recent first) until one passes, as the lookup does, and returns the
    nanoseconds the checks took (None when no entry passes: the replay is not the lookup that
    ran). None when this torch does not expose its cache entries or guard managers."""
    import inspect

    from torch._dynamo import eval_frame

    entries_of = getattr(eval_frame, "_debug_get_cache_entry_list", None)
    if entries_of is None:
        return None
    owner = getattr(target, "__self__", None)
    if isinstance(owner, torch.nn.Module):
        target = owner
    function: Any
    bound_self: tuple[Any, ...]
    if isinstance(target, torch.nn.Module):
        function, bound_self = getattr(type(target), "forward", None), (target,)
    else:
        function, bound_self = inspect.unwrap(getattr(target, "__func__", target)), ()
        if getattr(target, "__self__", None) is not None:
            bound_self = (target.__self__,)
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    clock = time.perf_counter_ns

    def replay(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
        bound = signature.bind(*bound_self, *args, **kwargs)
        bound.apply_defaults()
        f_locals = dict(bound.arguments)  # a frame's locals on entry: its arguments
        checks = [manager.root.check for entry in entries_of(code)
                  if (manager := getattr(entry, "guard_manager", None)) is not None and hasattr(manager, "root")]
        start = clock()
        for check in checks:
            if check(f_locals):
                return clock() - start
        return None

    return replay


def patch_compiled_graphs(wrap: Callable[[Callable[..., Any], str | None, Any, list[Any]], Callable[..., Any]]
                          ) -> Callable[[], None] | None:
    """Pass every graph the backend returns through ``wrap(compiled_fn, compile_id, frame code,
    example_inputs)`` before Dynamo installs it; None when this torch has no such seam."""
    output_graph = output_graph_class()
    if output_graph is None:
        return None
    original = output_graph.call_user_compiler

    def call_user_compiler(self: Any, gm: Any, example_inputs: list[Any]) -> Any:
        compiled_fn = _eagerly_recompiled(original(self, gm, example_inputs))
        try:
            code = getattr(getattr(self, "root_tx", None), "f_code", None)
            return wrap(compiled_fn, current_compile_id()[0], code, list(example_inputs))
        except Exception:
            return compiled_fn

    call_user_compiler.__wrapped__ = original  # type: ignore[attr-defined]
    output_graph.call_user_compiler = call_user_compiler

    def undo() -> None:
        output_graph.call_user_compiler = original

    return undo


def _eagerly_recompiled(compiled_fn: Any) -> Any:
    """Dynamo recompiles a lazy GraphModule it gets back before installing it; a wrapper would
    hide it, so do that first (else the first call would pay for Python code generation)."""
    try:
        from torch.fx._lazy_graph_module import _LazyGraphModule
    except ImportError:
        return compiled_fn
    owner = getattr(compiled_fn, "__self__", None)
    if isinstance(compiled_fn, _LazyGraphModule):
        _LazyGraphModule.force_recompile(compiled_fn)
    elif isinstance(owner, _LazyGraphModule) and getattr(compiled_fn, "__name__", "") == "_lazy_forward":
        _LazyGraphModule.force_recompile(owner)
        return owner.forward
    return compiled_fn


def force_eager() -> str:
    """Run every torch.compile'd function in eager from now on; returns how."""
    set_stance = getattr(getattr(torch, "compiler", None), "set_stance", None)
    if set_stance is not None:
        set_stance("force_eager")
        return 'torch.compiler.set_stance("force_eager")'
    torch._dynamo.config.disable = True
    return "torch._dynamo.config.disable = True"


def _on_import(name: str, install: Callable[[Any], Callable[[], None] | None]) -> Callable[[], None] | None:
    """``install(module)`` once the program imports the torch module ``name`` (at once if it is
    imported already); None where this torch has no such module. The undo stops the wait and
    undoes what ``install`` returned.

    For hooks in modules that cost about a second to import and that many runs never import
    (Inductor's autotuner, its CUDA-graph trees): importing them up front would make every
    recorded run that much slower, eager-backend runs too.
    """
    import importlib.util

    from dynscope.import_hooks import when_imported

    try:
        if importlib.util.find_spec(name) is None:
            return None
    except (ImportError, ValueError):
        return None
    undos: list[Callable[[], None]] = []

    def run(module: Any) -> None:
        try:
            undo = install(module)
        except Exception:  # inside the program's own import: a probe must never break it
            return
        if undo is not None:
            undos.append(undo)

    stop_waiting = when_imported(name, run)

    def undo() -> None:
        stop_waiting()
        for step in reversed(undos):
            step()

    return undo


def add_autotune_feedback(saver: Callable[..., None], unavailable: Callable[[str], None]) -> Callable[[], None] | None:
    """Have Inductor's autotuner hand every benchmarked selection to ``saver(timings, name, ...)``,
    from when the program's compile imports it. ``unavailable(why)`` is told if that torch's
    autotuner then has no feedback savers."""

    def install(select_algorithm: Any) -> Callable[[], None] | None:
        try:
            savers = select_algorithm.get_algorithm_selector_cache().feedback_saver_fns
        except Exception as e:
            unavailable(f"{type(e).__name__}: {e}")
            return None
        savers.append(saver)
        return lambda: savers.remove(saver) if saver in savers else None

    return _on_import("torch._inductor.select_algorithm", install)


def patch_cudagraph_trees(count: Callable[[str, str | None], None]) -> Callable[[], None] | None:
    """Have ``mode="reduce-overhead"``'s CUDA-graph trees report each warm-up run, recording and
    replay as ``count(kind, compile_id)``, from when the program's compile imports them; None
    when this torch has no such module (a manager without these methods is left alone)."""
    names = ("add_function", "run_eager", "record_function", "execute_node")

    def install(module: Any) -> Callable[[], None] | None:
        manager = getattr(module, "CUDAGraphTreeManager", None)
        if manager is None or not all(hasattr(manager, name) for name in names):
            return None
        return _count_cudagraph_calls(manager, names, count)

    return _on_import("torch._inductor.cudagraph_trees", install)


def _count_cudagraph_calls(manager: type, names: tuple[str, ...],
                           count: Callable[[str, str | None], None]) -> Callable[[], None]:
    originals = {name: getattr(manager, name) for name in names}
    adding: list[str | None] = [None]  # add_function runs the graph's first call itself

    def compile_id_of(self: Any, function_id: Any) -> str | None:
        known = getattr(self, "id_to_compile_id", {}).get(function_id)
        return str(known) if known is not None else adding[0]

    def add_function(self: Any, *args: Any, **kwargs: Any) -> Any:
        compile_id = kwargs.get("compile_id", args[-1] if args else None)
        adding[0] = str(compile_id) if compile_id is not None else None
        try:
            return originals["add_function"](self, *args, **kwargs)
        finally:
            adding[0] = None

    def run_eager(self: Any, new_inputs: Any, function_id: Any) -> Any:
        count("warmups", compile_id_of(self, function_id))
        return originals["run_eager"](self, new_inputs, function_id)

    def record_function(self: Any, new_inputs: Any, function_id: Any) -> Any:
        count("recordings", compile_id_of(self, function_id))
        return originals["record_function"](self, new_inputs, function_id)

    def execute_node(self: Any, node: Any, new_inputs: Any) -> Any:
        wrapped = getattr(node, "wrapped_function", None)
        count("replays", compile_id_of(self, getattr(wrapped, "id", None)))
        return originals["execute_node"](self, node, new_inputs)

    for name, fn in (("add_function", add_function), ("run_eager", run_eager),
                     ("record_function", record_function), ("execute_node", execute_node)):
        setattr(manager, name, fn)

    def undo() -> None:
        for name, fn in originals.items():
            setattr(manager, name, fn)

    return undo


# -- dynscope fix ---------------------------------------------------------------------------

# Configs a remedy may set; recorded with their current values so the parent only proposes
# settings this torch has and that are not already on.
REMEDY_CONFIGS = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops", "allow_unspec_int_on_nn_module",
                  "specialize_float", "specialize_int", "recompile_limit", "cache_size_limit",
                  "accumulated_recompile_limit", "suppress_errors", "use_numpy_random_stream")


def gpu_build() -> bool:
    """A CUDA or ROCm build of torch (whether or not a GPU is present)."""
    version = getattr(torch, "version", None)
    return bool(getattr(version, "cuda", None) or getattr(version, "hip", None))


def preload_for_probes() -> None:
    """Import (only import: no config is read or set, nothing is created) the torch modules that
    install_probes and a compile import lazily, so that processes forked from this one
    (dynscope fix's trial server) do not each pay for them (about 1.5 s on 2 CPU cores)."""
    import importlib

    for name in ("torch._dynamo.convert_frame", "torch._inductor.config", "torch._inductor.select_algorithm",
                 "torch._functorch.aot_autograd"):
        try:
            importlib.import_module(name)
        except Exception:  # a module this torch lacks or cannot import here: the run imports what it can
            pass


def remedy_features() -> dict[str, Any]:
    """What this torch offers the remedies of dynscope fix (analysis/remedies.py reads it)."""
    import torch._dynamo

    config = torch._dynamo.config
    features: dict[str, Any] = {name: getattr(config, name) for name in REMEDY_CONFIGS if hasattr(config, name)}
    features["reorderable_logging_functions"] = isinstance(getattr(config, "reorderable_logging_functions", None), set)
    features["mark_dynamic"] = hasattr(torch._dynamo, "mark_dynamic")
    features["maybe_mark_dynamic"] = hasattr(torch._dynamo, "maybe_mark_dynamic")
    features["compiler_disable"] = hasattr(getattr(torch, "compiler", None), "disable")
    features["torch_check"] = hasattr(torch, "_check")
    features.update(_escape_hatch_features())
    features.update(_inductor_remedy_features())
    return features


def _escape_hatch_features() -> dict[str, bool]:
    """The decorators the escape-hatch rewrites write (dynscope/rewrites/hatches.py), present or not:
    ``torch._dynamo.nonstrict_trace``, ``torch._dynamo.decorators.leaf_function``, ``torch.library.custom_op``."""
    import torch._dynamo

    decorators = getattr(torch._dynamo, "decorators", None)
    return {"nonstrict_trace": callable(getattr(torch._dynamo, "nonstrict_trace", None)),
            "leaf_function": callable(getattr(decorators, "leaf_function", None)),
            "custom_op": callable(getattr(getattr(torch, "library", None), "custom_op", None))}


# Inductor settings the numerics remedies try, recorded under their full dotted names (the remedy
# table tells them from Dynamo's bare names this way).
INDUCTOR_REMEDY_CONFIGS = ("emulate_precision_casts", "fallback_random")


def _inductor_remedy_features() -> dict[str, Any]:
    try:
        import torch._inductor.config as inductor_config
    except ImportError:  # a torch without Inductor: no numerics remedy to try
        return {}
    return {f"torch._inductor.config.{name}": getattr(inductor_config, name)
            for name in INDUCTOR_REMEDY_CONFIGS if hasattr(inductor_config, name)}


def reorderable_logging_functions() -> set | None:
    import torch._dynamo

    functions = getattr(torch._dynamo.config, "reorderable_logging_functions", None)
    return functions if isinstance(functions, set) else None


def mark_dynamic_function(maybe: bool) -> Callable[..., Any] | None:
    import torch._dynamo

    return getattr(torch._dynamo, "maybe_mark_dynamic" if maybe else "mark_dynamic", None)


def compiler_disable() -> Callable[..., Any] | None:
    return getattr(getattr(torch, "compiler", None), "disable", None)


def is_compiling() -> bool:
    compiler = getattr(torch, "compiler", None)
    check = getattr(compiler, "is_compiling", None) or getattr(torch._dynamo, "is_compiling", None)
    return bool(check()) if check is not None else False


# -- dynscope numerics ------------------------------------------------------------------------
# The numerics check needs each Inductor graph after its post-grad passes (the graph Inductor
# lowers: its node names are the ones the compiled code passes to run_intermediate_hooks), the
# compiled graph's calls (to take the first one's real inputs), and Inductor's intermediate-value
# hooks. Each lookup answers None where this torch lacks it.

INTERMEDIATE_HOOKS_ON = {"torch._inductor.config": {"generate_intermediate_hooks": True}}


def patch_inductor_graph_compiles(on_graph: Callable[[Any, bool, Any], None]) -> Callable[[], None] | None:
    """Call ``on_graph(post_grad_gm, is_backward, compiled_graph)`` after Inductor compiled a
    graph (``fx_codegen_and_compile`` runs the post-grad passes on ``gm`` in place and lowers
    it, so once it returns ``gm`` is the post-grad graph); None where this torch has no such seam."""
    try:
        from torch._inductor import compile_fx as module
    except ImportError:
        return None
    original = getattr(module, "fx_codegen_and_compile", None)
    if original is None:
        return None

    def fx_codegen_and_compile(gm: Any, *args: Any, **kwargs: Any) -> Any:
        compiled = original(gm, *args, **kwargs)
        try:
            on_graph(gm, bool(kwargs.get("is_backward", False)), compiled)
        except Exception:  # a probe must never break the compile
            pass
        return compiled

    fx_codegen_and_compile.__wrapped__ = original  # type: ignore[attr-defined]
    module.fx_codegen_and_compile = fx_codegen_and_compile

    def undo() -> None:
        if module.fx_codegen_and_compile is fx_codegen_and_compile:
            module.fx_codegen_and_compile = original

    return undo


def patch_compiled_graph_calls(intercept: Callable[[Any, list[Any], Callable[[list[Any]], Any]], Any]
                               ) -> Callable[[], None] | None:
    """Route every call of an Inductor-compiled graph through ``intercept(graph, inputs, call)``
    (``call(inputs)`` runs it); None where this torch has no CompiledFxGraph."""
    try:
        from torch._inductor.output_code import CompiledFxGraph
    except ImportError:
        return None
    original = CompiledFxGraph.__call__

    def __call__(self: Any, inputs: Any) -> Any:
        return intercept(self, inputs, lambda xs: original(self, xs))

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    CompiledFxGraph.__call__ = __call__

    def undo() -> None:
        CompiledFxGraph.__call__ = original

    return undo


def emit_more_intermediate_hooks() -> Callable[[], None] | None:
    """Make C++ kernels and extern (library) calls report their outputs to the intermediate hooks
    too: Inductor emits ``run_intermediate_hooks`` only after Triton kernels and allocating extern
    calls. The added lines read the buffer with ``locals().get`` (a buffer the wrapper did not
    keep reaches the hook as None); None where this torch lacks either seam."""
    try:
        from torch._inductor import config as inductor_config
        from torch._inductor.codegen.cpp import CppScheduling
        from torch._inductor.scheduler import Scheduler
        from torch._inductor.virtualized import V
    except ImportError:
        return None
    flush, extern_call = getattr(CppScheduling, "flush", None), getattr(Scheduler, "codegen_extern_call", None)
    if flush is None or extern_call is None:
        return None

    def write_hooks(nodes: Any, live: Any) -> None:
        wrapper = V.graph.wrapper_code
        if not (inductor_config.generate_intermediate_hooks and getattr(wrapper, "supports_intermediate_hooks", False)):
            return
        for node in nodes:
            origin = _origin_node(getattr(node, "node", None))
            for buffer in node.get_outputs():
                if origin is not None and (live is None or buffer.get_name() in live):
                    wrapper.writeline(f"run_intermediate_hooks({origin.name!r}, locals().get({buffer.get_name()!r}))")
                # A kernel that updates a buffer in place (a scatter's atomic adds) finishes the value
                # of the buffer it mutates: report it under that buffer's node (the mutation itself
                # often has no FX node of its own).
                for name in getattr(buffer, "get_mutations", list)():
                    target = _origin_node(V.graph.name_to_buffer.get(name)) or origin
                    if target is not None and (live is None or name in live):
                        wrapper.writeline(f"run_intermediate_hooks({target.name!r}, locals().get({name!r}))")

    def cpp_flush(self: Any) -> Any:
        group = getattr(self, "kernel_group", None)
        scheduled = list(getattr(group, "scheduled_nodes", None) or ())
        result = flush(self)
        try:
            if scheduled and group is not None:
                write_hooks(scheduled, group.args.live_output_buffers())
        except Exception:  # never break code generation
            pass
        return result

    def codegen_extern_call(self: Any, scheduler_node: Any) -> Any:
        result = extern_call(self, scheduler_node)
        try:
            write_hooks([scheduler_node], None)
        except Exception:
            pass
        return result

    CppScheduling.flush = cpp_flush
    Scheduler.codegen_extern_call = codegen_extern_call
    # Triton: Inductor's own hooks skip a buffer a kernel updates in place (relu on addmm's output).
    simd = _simd_scheduling()
    node_schedule = getattr(simd, "codegen_node_schedule", None) if simd is not None else None

    def codegen_node_schedule(self: Any, kernel_features: Any, *args: Any, **kwargs: Any) -> Any:
        assert node_schedule is not None  # installed only when there is one
        result = node_schedule(self, kernel_features, *args, **kwargs)
        try:
            write_hooks(list(kernel_features.scheduler_nodes()), None)
        except Exception:
            pass
        return result

    if simd is not None and node_schedule is not None:
        simd.codegen_node_schedule = codegen_node_schedule

    def undo() -> None:
        CppScheduling.flush = flush
        Scheduler.codegen_extern_call = extern_call
        if simd is not None and node_schedule is not None:
            simd.codegen_node_schedule = node_schedule

    return undo


def _origin_node(ir_node: Any) -> Any:
    try:
        return ir_node.get_origin_node() if ir_node is not None else None
    except Exception:  # an IR node kind with no origin
        return None


def _simd_scheduling() -> Any:
    try:
        from torch._inductor.codegen.simd import SIMDScheduling
    except ImportError:
        return None
    return SIMDScheduling


def compiled_graph_source(compiled_graph: Any) -> str:
    """The output code (the Python wrapper module) of an Inductor-compiled graph, "" if unknown."""
    source = getattr(compiled_graph, "source_code", None)
    return source if isinstance(source, str) else ""


def intermediate_values(record: Callable[[str, Any], None]) -> Any:
    """A context in which the compiled code's ``run_intermediate_hooks(name, buffer)`` calls
    ``record``; None where this torch has no intermediate hooks."""
    try:
        from torch._inductor.hooks import intermediate_hook
    except ImportError:
        return None
    return intermediate_hook(record)


_SEEDED_PRIMS = ("inductor_random", "inductor_randint", "inductor_seeds", "inductor_lookup_seed", "inductor_seed")


def is_seeded_random(target: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> bool:
    """Whether an FX call draws random numbers (dropout, rand, Inductor's seeded prims): its value
    and everything computed from it differ between the compiled and the eager run by design. An op
    tagged random only for its dropout (attention) is not, when its ``dropout_p`` is 0."""
    tags = getattr(target, "tags", ())
    if torch.Tag.nondeterministic_seeded in tags:
        return not _dropout_off(target, args, kwargs or {})
    name = str(getattr(target, "__name__", target))
    return any(name.startswith(p) for p in _SEEDED_PRIMS)


def _dropout_off(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    schema = getattr(target, "_schema", None)
    names = [a.name for a in getattr(schema, "arguments", ())]
    if schema is None or "dropout_p" not in names:
        return False
    at = names.index("dropout_p")
    value = kwargs.get("dropout_p", args[at] if at < len(args) else schema.arguments[at].default_value)
    return isinstance(value, (int, float)) and value == 0


def rng_state() -> tuple[Any, list[Any]]:
    """The CPU and (where initialized) CUDA random states, to give the program back after the check's own runs."""
    cuda = torch.cuda.get_rng_state_all() if cuda_initialized() else []
    return torch.get_rng_state(), cuda


def set_rng_state(state: tuple[Any, list[Any]]) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda:
        torch.cuda.set_rng_state_all(cuda)
