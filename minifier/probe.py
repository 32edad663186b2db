"""Hooks inside the user's process that notice a failing graph and record it.

``watch_backend_calls`` wraps Dynamo's hand-off of each graph to the backend
(OutputGraph.call_user_compiler): the same hook tells the detection run, the worker and the
verifier whether an exception came from compiling or from running compiled code.
``FailureProbe`` is the detection run's probe: it serializes every Dynamo graph before the
backend sees it (backends mutate graphs), wraps the compiled function it gets back, checks
its first call (backward too when gradients flow, and accuracy against eager with
--accuracy), and on the first failure writes ``failure.json`` (and the input values when the
failure may depend on them) and stops the program. A small shared marker file says which
graph is compiling or running, so that the parent can name the graph when the process
crashes or hangs in generated code.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from dynscope.minifier import standalone
from dynscope.minifier.attribution import attribute, frames_of
from dynscope.minifier.files import COMPILING, FAILURE_FILE, GRAPHS_DIR, IDLE, MARKER_FILE, RUNNING, VALUES_FILE, Marker
from dynscope.minifier.fragment import Fragment
from dynscope.minifier.rebuild import RebuildError, build_module, describe_input
from dynscope.minifier.signature import ACCURACY, COMPILE_ERROR, RUNTIME_ERROR, from_exception
from dynscope.probes import compat
from dynscope.probes.fx_graphs import serialize_graph


class StopProgram(BaseException):
    """Ends the user's program once its first failure is recorded (a BaseException, so the
    program's own ``except Exception`` handlers let it pass)."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


def classify(exc: BaseException, *, during_compile: bool) -> str:
    """compile_error or runtime_error. A backward graph is compiled lazily, on the first
    backward: its compile errors arrive wrapped (BackendCompilerFailed / InductorError)."""
    if during_compile or getattr(exc, "inner_exception", None) is not None:
        return COMPILE_ERROR
    return RUNTIME_ERROR


def watch_backend_calls(on_call: Callable[[Any, Any, list[Any], Callable[[], Any]], Any]) -> Callable[[], None]:
    """Route Dynamo's backend calls through ``on_call(output_graph, gm, example_inputs, compile)``."""
    cls = compat.output_graph_class()
    if cls is None:
        raise RuntimeError("this torch has no OutputGraph.call_user_compiler to hook")
    original = cls.call_user_compiler

    def call_user_compiler(self: Any, gm: Any, example_inputs: list[Any]) -> Any:
        return on_call(self, gm, example_inputs, lambda: original(self, gm, example_inputs))

    cls.call_user_compiler = call_user_compiler

    def undo() -> None:
        cls.call_user_compiler = original

    return undo


class CompileWatch:
    """Remembers an exception raised while a backend compiled (for ``classify``), and calls
    ``on_compiled`` once a backend has compiled a graph (before it runs)."""

    def __init__(self, on_compiled: Callable[[], None] | None = None) -> None:
        self.compile_error: BaseException | None = None
        self.on_compiled = on_compiled
        self._undo: Callable[[], None] | None = None

    def __enter__(self) -> CompileWatch:
        def on_call(_graph: Any, _gm: Any, _inputs: list[Any], compile: Callable[[], Any]) -> Any:
            try:
                compiled = compile()
            except Exception as e:
                self.compile_error = e
                raise
            if self.on_compiled is not None:
                self.on_compiled()
            return compiled

        self._undo = watch_backend_calls(on_call)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._undo is not None:
            self._undo()

    def kind_of(self, exc: BaseException) -> str:
        during = self.compile_error is not None and _chained(exc, self.compile_error)
        return classify(exc, during_compile=during)


def _chained(exc: BaseException, target: BaseException) -> bool:
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if current is target:
            return True
        seen.add(id(current))
        current = getattr(current, "inner_exception", None) or current.__cause__ or current.__context__
    return False


@dataclass
class GraphRecord:
    index: int
    compile_id: str | None
    fragment: Fragment
    backend: dict[str, Any]
    grad_enabled: bool
    configs: dict[str, dict[str, Any]]  # non-default torch settings when it was compiled

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "compile_id": self.compile_id, **self.fragment.to_json(),
                "backend": self.backend, "grad_enabled": self.grad_enabled, "configs": self.configs}


class FailureProbe:
    def __init__(self, out_dir: str, *, accuracy: dict[str, float] | None) -> None:
        self.out_dir = out_dir
        self.accuracy = accuracy
        self.records: list[GraphRecord] = []
        self.notes: list[str] = []
        os.makedirs(os.path.join(out_dir, GRAPHS_DIR), exist_ok=True)
        self.marker = Marker(os.path.join(out_dir, MARKER_FILE))
        self._fallbacks = compat.backend_fallback_exceptions()
        self._undo: Callable[[], None] | None = None

    def install(self) -> FailureProbe:
        self._undo = watch_backend_calls(self._on_compile)
        return self

    def remove(self) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None

    # -- compile -----------------------------------------------------------------------------

    def _on_compile(self, output_graph: Any, gm: Any, example_inputs: list[Any], compile: Callable[[], Any]) -> Any:
        compile_id, _ = compat.current_compile_id()
        record = GraphRecord(
            index=len(self.records),
            compile_id=compile_id,
            fragment=Fragment(serialize_graph(gm), [describe_input(x) for x in example_inputs]),
            backend=compat.describe_backend(output_graph.compiler_fn),
            grad_enabled=torch.is_grad_enabled(),
            configs=compat.nondefault_configs(),
        )
        self.records.append(record)
        _write_json(os.path.join(self.out_dir, GRAPHS_DIR, f"{record.index}.json"), record.to_json())
        self.marker.set(record.index, COMPILING)
        try:
            compiled = compile()
        except self._fallbacks:
            raise
        except Exception as e:
            self._fail(record, COMPILE_ERROR, e)
        finally:
            self.marker.set(-1, IDLE)
        return self._wrap(compiled, record)

    # -- run -----------------------------------------------------------------------------------

    def _wrap(self, compiled: Callable[..., Any], record: GraphRecord) -> Callable[..., Any]:
        # Dynamo calls what the backend returned with the graph's inputs as arguments (a
        # ``_boxed_call`` attribute copied onto it by functools-style wrapping says nothing).
        first_call = [True]

        def run(*args: Any) -> Any:
            call_args = list(args)
            self.marker.set(record.index, RUNNING)
            try:
                if first_call[0]:
                    first_call[0] = False
                    self._check_first_call(compiled, record, call_args)
                outputs = compiled(*args)
                compat.synchronize_devices(call_args)
                return outputs
            except StopProgram:
                raise
            except Exception as e:
                self._fail(record, classify(e, during_compile=False), e, values=call_args)
            finally:
                self.marker.set(-1, IDLE)

        return run

    def _check_first_call(self, compiled: Callable[..., Any], record: GraphRecord, call_args: list[Any]) -> None:
        """Run the compiled graph once on copies of the inputs: forward, and backward when
        gradients flow (the backward graph is compiled only then), and compare with eager
        under --accuracy. The program's own inputs and random stream stay untouched."""
        wants_grads = torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in call_args)
        if not (self.accuracy or wants_grads):
            return

        with own_random_stream(call_args):
            torch.manual_seed(0)
            try:
                actual, actual_grads = standalone.run_with_grads(compiled, standalone.clone_inputs(call_args))
                compat.synchronize_devices(call_args)
            except Exception as e:
                self._fail(record, classify(e, during_compile=False), e, values=call_args)
            if not self.accuracy:
                return
            if record.fragment.has_random_ops():
                self.notes.append(f"graph {record.index}: not compared with eager (it draws random numbers)")
                return
            problem = self._compare_with_eager(record, call_args, actual, actual_grads)
        if problem:
            self._fail(record, ACCURACY, AssertionError(problem), values=call_args)

    def _compare_with_eager(self, record: GraphRecord, call_args: list[Any], actual: Any,
                            actual_grads: list[Any] | None) -> str | None:
        try:
            module = build_module(record.fragment.graph)
        except RebuildError as e:
            self.notes.append(f"graph {record.index}: not compared with eager ({e})")
            return None
        torch.manual_seed(0)
        expected, expected_grads = standalone.run_with_grads(module, standalone.clone_inputs(call_args))
        try:
            torch.manual_seed(0)
            reference, reference_grads = standalone.run_with_grads(module, standalone.to_float64(standalone.clone_inputs(call_args)))
        except Exception:  # an op without a float64 kernel: compare with eager alone
            reference = reference_grads = None
        assert self.accuracy is not None  # compared with eager only under --accuracy
        rtol, atol = self.accuracy["rtol"], self.accuracy["atol"]
        problem = standalone.accuracy_problem(expected, actual, reference, rtol, atol, "output")
        if problem is None and expected_grads is not None and actual_grads is not None:
            problem = standalone.accuracy_problem(expected_grads, actual_grads, reference_grads, rtol, atol, "gradient")
        return problem

    # -- failure -------------------------------------------------------------------------------

    def _fail(self, record: GraphRecord, kind: str, exc: BaseException, values: list[Any] | None = None) -> None:
        """Write the failure down and stop the program."""
        attribution = attribute(frames_of(exc)) if kind != ACCURACY else None
        failure = {
            **record.to_json(),
            "kind": kind,
            "signature": from_exception(exc, kind).to_json(),
            "attribution": attribution.to_json() if attribution else None,
            "exception": {"type": type(exc).__name__, "message": _safe_str(exc)[:4000],
                          "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-20000:]},
            "values": None,
            "accuracy": self.accuracy,
            "notes": self.notes,
            "time": time.time(),
        }
        path = os.path.join(self.out_dir, FAILURE_FILE)
        _write_json(path, failure)  # first, in case saving the values fails too
        if values is not None and kind in (RUNTIME_ERROR, ACCURACY) and self._save_values(values):
            _write_json(path, {**failure, "values": VALUES_FILE})
        raise StopProgram(exc) from exc

    def _save_values(self, values: list[Any]) -> bool:
        """The inputs' values, for failures that may depend on them. Best effort: after a
        device-side assert, for one, the GPU cannot even copy them out."""
        try:
            torch.save([v.detach() if isinstance(v, torch.Tensor) else v for v in values],
                       os.path.join(self.out_dir, VALUES_FILE))
            return True
        except Exception as e:
            self.notes.append(f"the input values could not be saved ({type(e).__name__})")
            return False


@contextlib.contextmanager
def own_random_stream(values: list[Any]) -> Iterator[None]:
    """Like torch.random.fork_rng for the devices of ``values``: what runs inside draws from
    the random stream without moving it for the program. Unlike fork_rng, a GPU broken by
    what ran (a device-side assert) cannot turn restoring its state into a new error."""
    devices = sorted({x.device.index or 0 for x in values if isinstance(x, torch.Tensor) and x.device.type == "cuda"})
    cpu_state = torch.get_rng_state()
    cuda_states = [torch.cuda.get_rng_state(d) for d in devices]
    try:
        yield
    finally:
        torch.set_rng_state(cpu_state)
        for device, state in zip(devices, cuda_states):
            try:
                torch.cuda.set_rng_state(state, device)
            except Exception:
                pass


def _write_json(path: str, data: Any) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, default=str)
    os.replace(tmp, path)


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return f"<unprintable {type(exc).__name__}>"
