"""One check: rebuild a graph, compile it with a backend, run it, and say how it failed.

Runs in the worker process. A check compiles the rebuilt GraphModule with
``torch.compile(backend=...)`` (exactly what the repro script does), runs
it on fresh inputs (forward, and backward when gradients flow) and, for accuracy failures,
compares with eager judged against float64. CompilerBisector's per-application questions
("lower this op?", "run this pass?") are answered by a decider that records every
application and can switch off all but the first N of one subsystem: that is how
minifier/bisect.py bisects Inductor's lowerings, passes and AOT's decompositions.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import torch

from dynscope.minifier import replay_settings, standalone
from dynscope.minifier.fragment import Fragment
from dynscope.minifier.probe import CompileWatch, own_random_stream
from dynscope.minifier.rebuild import RebuildError, build_module, load_values, make_inputs, recorded_inputs
from dynscope.minifier.signature import RUNTIME_ERROR, from_exception, poisons_device
from dynscope.probes import compat

_MAX_APPLICATIONS = 2000  # per subsystem: a big graph lowers thousands of nodes


def run_check(request: dict[str, Any], notify: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """``notify`` receives the applications counted so far once the graph is compiled, so
    that a check that then crashes the worker still reports them."""
    started = time.perf_counter()
    fragment = Fragment.from_json(request["fragment"])
    try:
        module = build_module(fragment.graph)
        recorded = request.get("values")
        values = load_values(recorded["path"], recorded["names"]) if recorded else None
    except RebuildError as e:
        return {"invalid": str(e), "seconds": time.perf_counter() - started}
    applications: dict[str, list[str]] = {}
    subsystem = request.get("subsystem")
    undo_decider = compat.install_subsystem_decider(_decider(subsystem, applications))
    # The case's settings were reduced to replay_settings' table when it was read; a request
    # gets the same filter, so that no other setting is ever applied here.
    configs, _ = replay_settings.split(request.get("configs") or {})
    if subsystem is not None:  # a cache hit would skip the very passes and lowerings being counted
        configs = _merge(configs, compat.CACHES_OFF)
        compat.keep_kernel_builds_for_tests()  # the test suite's knob; nothing without it
    undo_configs = compat.patch_configs(configs)

    def compiled() -> None:
        if notify is not None:
            notify({"applications": {k: v[:_MAX_APPLICATIONS] for k, v in applications.items()}})

    escaped = False
    inputs: list[Any] = []
    try:
        inputs = make_inputs(fragment, values, seed=request.get("seed", 0))
        signature = _compile_and_run(module, inputs, fragment, request, compiled)
    except RebuildError as e:
        return {"invalid": str(e), "seconds": time.perf_counter() - started}
    except Exception as e:  # raised outside the compiled code: the GPU it broke, say
        signature, escaped = from_exception(e, RUNTIME_ERROR), True
    finally:
        undo_configs()
        if undo_decider is not None:
            undo_decider()
    broken = escaped or _device_broken() or poisons_device(signature)
    return {
        "signature": signature.to_json() if signature else None,
        "applications": {k: v[:_MAX_APPLICATIONS] for k, v in applications.items()},
        "seconds": time.perf_counter() - started,
        # After a device-side assert the CUDA context is unusable: the next check needs a new worker.
        "restart": broken,
        "cuda": compat.cuda_initialized(),  # the next worker may as well create its CUDA context early
    }


def _device_broken() -> bool:
    """A GPU error that nothing reported yet (a kernel that Inductor's autotuning ran and
    whose failure it swallowed leaves the context broken all the same). Whatever the graph's
    inputs: a graph may make its GPU tensors itself. A device-side assert is sticky, so this
    synchronization fails again after the check already saw it."""
    try:
        compat.synchronize_cuda()
        return False
    except Exception:
        return True


def _compile_and_run(module: torch.fx.GraphModule, inputs: list[Any], fragment: Fragment,
                     request: dict[str, Any], on_compiled: Callable[[], None]):
    backend, _ = replay_settings.checked_backend(request["backend"])
    options = {k: backend[k] for k in ("mode", "options") if backend.get(k)}
    accuracy = request.get("accuracy")
    seed = request.get("seed", 0)
    compat.reset_dynamo()
    with CompileWatch(on_compiled) as watch, own_random_stream(inputs), \
            torch.set_grad_enabled(bool(request.get("grad_enabled", True))):
        # Not fullgraph=True: the graph has no breaks (Dynamo made it), but when generated code
        # fails Dynamo may see frames of torch's own error handling, which it must skip, not refuse.
        compiled = torch.compile(module, backend=backend["name"], **options)
        torch.manual_seed(seed)
        try:
            actual, actual_grads = standalone.run_with_grads(compiled, standalone.clone_inputs(inputs))
            compat.synchronize_cuda()  # a kernel's failure surfaces here, as this check's
        except Exception as e:
            return from_exception(e, watch.kind_of(e))
        if not accuracy or fragment.has_random_ops():
            return None
        torch.manual_seed(seed)
        expected, expected_grads = standalone.run_with_grads(module, standalone.clone_inputs(inputs))
        try:
            torch.manual_seed(seed)
            reference, reference_grads = standalone.run_with_grads(module, standalone.to_float64(standalone.clone_inputs(inputs)))
        except Exception:
            reference = reference_grads = None
        problem = standalone.accuracy_problem(expected, actual, reference, accuracy["rtol"], accuracy["atol"], "output")
        if problem is None and expected_grads is not None and actual_grads is not None:
            problem = standalone.accuracy_problem(expected_grads, actual_grads, reference_grads, accuracy["rtol"],
                                           accuracy["atol"], "gradient")
        return from_exception(AssertionError(problem), "accuracy") if problem else None


def _merge(base: dict[str, dict[str, Any]], extra: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    merged = {module: dict(values) for module, values in base.items()}
    for module, values in extra.items():
        merged.setdefault(module, {}).update(values)
    return merged


def _decider(target: dict[str, Any] | None, applications: dict[str, list[str]]):
    """Answers CompilerBisector's "skip this application?": records each one, and skips
    those of the target subsystem after the first ``limit + 1`` (limit -1: skip all)."""
    target_key = f"{target['backend']}/{target['name']}" if target else None
    limit = target.get("limit") if target else None

    def decide(backend: str, subsystem: str, what: str) -> bool:
        key = f"{backend}/{subsystem}"
        seen = applications.setdefault(key, [])
        index = len(seen)
        seen.append(what)
        return key == target_key and limit is not None and index > limit

    return decide


def forward_source(graph: dict[str, Any]) -> dict[str, Any]:
    """The Python source of a rebuilt graph's forward as torch.fx prints it (without the
    ``x = None`` statements FX adds to free memory early), and the imports it needs."""
    module = build_module(graph)
    code = module.graph.python_code("self")
    lines = []
    for line in code.src.strip("\n").splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        # FX writes "a = f(b);  b = None" and "getitem += 2;  iadd = getitem;  getitem = None":
        # keep every statement but the frees.
        first, *rest = line.strip().split(";  ")
        lines += [indent + s for s in [first, *(s for s in rest if not _FREES.fullmatch(s.strip()))]]
    source = "\n".join(line.rstrip() for line in lines)
    return {"source": source, "imports": _imports_for(code.globals, source)}


_FREES = re.compile(r"(\w+ = )+None")


# Names torch.fx's generated code may use, and how a standalone script gets them.
_FX_GLOBALS = {
    "torch": "import torch",
    "device": "from torch import device",
    "inf": "from math import inf",
    "nan": "from math import nan",
    "NoneType": "NoneType = type(None)",
    "fx_pytree": "import torch.fx._pytree as fx_pytree",
    "pytree": "import torch.utils._pytree as pytree",
}


def _imports_for(globals_: dict[str, Any], source: str) -> list[str]:
    import builtins
    import re

    lines = []
    for name, value in globals_.items():
        if not re.search(rf"\b{re.escape(name)}\b", source):
            continue
        if name in _FX_GLOBALS:
            lines.append(_FX_GLOBALS[name])
        elif getattr(builtins, name, None) is value:
            continue
        elif getattr(value, "__module__", None) and getattr(value, "__name__", None):
            lines.append(f"from {value.__module__} import {value.__name__} as {name}")
    return sorted(set(lines), key=lambda text: (not text.startswith("import"), text))


def warm_up(*, run: bool = True, compile: bool = True) -> dict[str, Any]:
    """Pay Inductor's one-time costs (imports, the C++ toolchain probe) before the first
    real check. ``run=False`` compiles without running the result, so that no OpenMP thread
    exists afterwards and the process can still fork safely. ``compile=False`` only imports
    what a compile for a GPU imports: where a GPU is present, Inductor's first compile
    initializes CUDA (it traces its pattern-matcher patterns on "cuda"), and the fork server
    must not (its forked workers could not use CUDA then)."""
    started = time.perf_counter()
    if not compile:
        failed = compat.import_compiler_modules()
        return {"seconds": time.perf_counter() - started, "not_imported": failed}
    undo = compat.patch_configs(compat.CACHES_OFF)  # a cache hit would skip the code generation to warm up
    compat.keep_kernel_builds_for_tests()  # the test suite's knob; nothing without it
    try:
        if run:
            compat.reset_dynamo()
            torch.compile(lambda x: x * 2 + 1, backend="inductor")(torch.ones(8))
        else:
            module = torch.fx.symbolic_trace(lambda x: x * 2 + 1)
            compat.inductor_compile(module, [torch.ones(8)])
    finally:
        undo()
        compat.reset_dynamo()
    return {"seconds": time.perf_counter() - started}


def prepare(*, cuda: bool) -> dict[str, Any]:
    """A spare worker's warm-up, while another worker checks: create the CUDA context that
    the next check would otherwise create (nothing else: no compile, no torch state that a
    check could see)."""
    started = time.perf_counter()
    if cuda:
        compat.cuda_smoke_test()
    return {"seconds": time.perf_counter() - started}


def nondefault_from_dumps(recorded: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """From full config dumps (a capture's compilation_metrics): the non-default values."""
    found = {name: compat.nondefault_from_dump(name, values) for name, values in recorded.items()}
    return {name: values for name, values in found.items() if values}


def save_repro_values(request: dict[str, Any]) -> dict[str, Any]:
    """Save the recorded values a minimized graph still uses, by input name, for its repro."""
    fragment = Fragment.from_json(request["fragment"])
    values = load_values(request["values"]["path"], request["values"]["names"])
    kept = {name: value.detach() if isinstance(value, torch.Tensor) else value
            for name, value in recorded_inputs(fragment, values).items()}
    torch.save(kept, request["out"])
    return {"names": sorted(kept)}
