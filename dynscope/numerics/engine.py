"""The numerics check, in the recording child: every Inductor graph at its first call, run
compiled (twice: run-to-run differences are nondeterminism, not bugs), in eager at the program's
precision and in a higher-precision reference, each intermediate the compiled code exposes
compared. The first call still returns the compiled result to the program, and the program's
random state is given back as it was after that call.

Torch internals are reached only through dynscope.probes.compat.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from dynscope.events import NumericsNode
from dynscope.numerics.criterion import Criterion, finite_error
from dynscope.numerics.where import kernels_by_node, source_of, user_stack
from dynscope.probes import compat

_LOW = (torch.bfloat16, torch.float16)


@dataclass
class _Graph:
    """An Inductor graph waiting for its first call."""

    order: int  # compile order
    compile_id: str
    direction: str
    gm: torch.fx.GraphModule
    output_code: str


@dataclass
class GraphResult:
    order: int
    nodes: list[NumericsNode]
    program_dtype: torch.dtype
    reference_dtype: torch.dtype
    not_compared: int  # exposed nodes computed from random numbers (no eager counterpart)


@dataclass
class NumericsProbe:
    criterion: Criterion
    results: list[GraphResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    _pending: dict[int, _Graph] = field(default_factory=dict)
    _order: itertools.count[int] = field(default_factory=itertools.count)
    _undo: list[Callable[[], None]] = field(default_factory=list)

    def install(self) -> NumericsProbe:
        hooks_off = compat.patch_configs(compat.INTERMEDIATE_HOOKS_ON)
        self._undo.append(hooks_off)
        more_hooks = compat.emit_more_intermediate_hooks()
        if more_hooks is None:
            self.errors.append("this torch's C++ kernels and library calls cannot report their outputs: "
                               "only Triton kernels' intermediates are compared")
        else:
            self._undo.append(more_hooks)
        for undo in (compat.patch_inductor_graph_compiles(self._on_graph),
                     compat.patch_compiled_graph_calls(self._on_call)):
            if undo is None:
                self.errors.append("this torch has no seam for Inductor's compiled graphs: nothing can be checked")
            else:
                self._undo.append(undo)
        return self

    def remove(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _on_graph(self, gm: Any, is_backward: bool, compiled: Any) -> None:
        compile_id = compat.current_compile_id()[0] or "?"
        self._pending[id(compiled)] = _Graph(next(self._order), compile_id, "backward" if is_backward else "forward",
                                             gm, compat.compiled_graph_source(compiled))

    def _on_call(self, compiled: Any, inputs: list[Any], call: Callable[[list[Any]], Any]) -> Any:
        graph = self._pending.pop(id(compiled), None)
        if graph is None:
            return call(inputs)
        return self._check(graph, inputs, call)

    def _check(self, graph: _Graph, inputs: list[Any], call: Callable[[list[Any]], Any]) -> Any:
        started = time.perf_counter()
        pristine = [_clone(x) for x in inputs]  # the compiled call may mutate (and clears) its inputs
        before = compat.rng_state()
        first: dict[str, torch.Tensor] = {}
        hooks = compat.intermediate_values(lambda name, value: _keep(first, name, value))
        if hooks is None:
            self.errors.append("this torch has no intermediate-value hooks: nothing can be checked")
            return call(inputs)
        paused = time.perf_counter()
        with hooks:
            result = call(inputs)  # the program's own call: its result goes back unchanged
        resumed = time.perf_counter()
        after = compat.rng_state()
        try:
            # The reruns would repeat the program's own warnings (each eager op warns again).
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.results.append(self._compare(graph, pristine, first, before, call))
        except Exception as e:  # the check must never break the program
            self.errors.append(f"graph {graph.compile_id} ({graph.direction}): {type(e).__name__}: {e}")
        finally:
            compat.set_rng_state(after)
        self.elapsed_s += (paused - started) + (time.perf_counter() - resumed)
        return result

    def _compare(self, graph: _Graph, pristine: list[Any], first: dict[str, torch.Tensor],
                 rng: tuple[Any, list[Any]], call: Callable[[list[Any]], Any]) -> GraphResult:
        compat.set_rng_state(rng)
        second: dict[str, torch.Tensor] = {}
        hooks = compat.intermediate_values(lambda name, value: _keep(second, name, value))
        with hooks:
            call([_clone(x) for x in pristine])
        wanted = set(first)
        compat.set_rng_state(rng)
        eager = _Recorder(graph.gm, wanted, None).values([_clone(x) for x in pristine])
        program_dtype = _program_dtype(pristine)
        reference_dtype = torch.float32 if program_dtype in _LOW else torch.float64
        compat.set_rng_state(rng)
        reference = _Recorder(graph.gm, wanted, reference_dtype).values([_upcast(x, reference_dtype) for x in pristine])
        random = _from_random(graph.gm)
        kernels = kernels_by_node(graph.output_code)
        nodes: list[NumericsNode] = []
        not_compared = 0
        for index, node in enumerate(graph.gm.graph.nodes):
            compiled = first.get(node.name)
            if compiled is None:
                continue
            if node.name in random:
                not_compared += 1
                continue
            compared = self._node(graph, index, node, compiled, second.get(node.name), eager.get(node.name),
                                  reference.get(node.name), kernels.get(node.name, ""))
            if compared is not None:
                nodes.append(compared)
        return GraphResult(graph.order, nodes, program_dtype, reference_dtype, not_compared)

    def _node(self, graph: _Graph, index: int, node: torch.fx.Node, compiled: torch.Tensor,
              again: torch.Tensor | None, eager: torch.Tensor | None, reference: torch.Tensor | None,
              kernel: str) -> NumericsNode | None:
        if eager is None or reference is None or not compiled.is_floating_point():
            return None
        if compiled.shape != eager.shape or compiled.shape != reference.shape:
            return None
        if not bool(torch.isfinite(reference).all()):
            return None  # the reference itself overflowed: no error to measure against it
        nondeterministic = again is not None and not _bitwise_equal(compiled, again)
        ref = reference.to(torch.float64)
        eager_error = _rmse(ref, eager)
        compiled_error = _rmse(ref, compiled)
        tol = self.criterion.close_tolerance()
        close = bool(torch.allclose(eager.to(torch.float64), compiled.to(torch.float64), rtol=tol, atol=tol, equal_nan=True))
        dtype = str(compiled.dtype).removeprefix("torch.")
        suspect = not nondeterministic and self.criterion.is_suspect(
            eager_error=eager_error, compiled_error=compiled_error, dtype=dtype, numel=compiled.numel(), close=close)
        stack = user_stack(node.meta.get("stack_trace"))
        return NumericsNode(graph=graph.compile_id, direction=graph.direction, index=index, node=node.name,
                            op=str(node.target), eager_error=finite_error(eager_error),
                            compiled_error=finite_error(compiled_error), kernel=kernel, source=source_of(stack),
                            stack=stack, nondeterministic=nondeterministic, suspect=suspect)


class _Recorder(torch.fx.Interpreter):  # type: ignore[misc, unused-ignore]  # Any to mypy --strict
    """Runs a post-grad graph in eager, keeping the values of the ``wanted`` nodes; with
    ``reference`` set, every floating computation runs in that dtype (dtype arguments that name a
    lower floating precision are raised to it), falling back to the node's own dtypes where an op
    does not take the higher one."""

    def __init__(self, gm: torch.fx.GraphModule, wanted: set[str], reference: torch.dtype | None) -> None:
        super().__init__(gm, garbage_collect_values=True)
        self.wanted = wanted
        self.reference = reference
        self.kept: dict[str, torch.Tensor] = {}
        self._current: torch.fx.Node | None = None

    def values(self, inputs: list[Any]) -> dict[str, torch.Tensor]:
        self.run(*inputs)
        return self.kept

    def run_node(self, n: torch.fx.Node) -> Any:
        self._current = n
        value = super().run_node(n)
        if n.name in self.wanted and isinstance(value, torch.Tensor):
            self.kept[n.name] = value.detach().clone()
        return value

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if self.reference is None:
            return super().call_function(target, args, kwargs)
        raised = torch.fx.node.map_aggregate((args, kwargs), self._raise)
        try:
            return super().call_function(target, *raised)
        except (RuntimeError, NotImplementedError, TypeError):  # no kernel for that dtype here
            assert self._current is not None
            lowered = torch.fx.node.map_aggregate((args, kwargs), _to_meta_dtype(self._current))
            out = super().call_function(target, *lowered)
            return torch.fx.node.map_aggregate(out, lambda v: _upcast(v, self.reference))

    def _raise(self, value: Any) -> Any:
        assert self.reference is not None
        if isinstance(value, torch.dtype) and value.is_floating_point and _lower(value, self.reference):
            return self.reference
        return _upcast(value, self.reference)


def _to_meta_dtype(node: torch.fx.Node) -> Callable[[Any], Any]:
    """Cast a node's tensor arguments back to the dtypes its inputs have in the graph."""
    dtypes = [getattr(a.meta.get("val"), "dtype", None) for a in node.all_input_nodes]
    target = next((d for d in dtypes if d is not None and d.is_floating_point), None)

    def lower(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and target is not None:
            return value.to(target)
        return value

    return lower


def _lower(dtype: torch.dtype, than: torch.dtype) -> bool:
    return bool(torch.finfo(dtype).bits < torch.finfo(than).bits)


def _upcast(value: Any, dtype: torch.dtype | None) -> Any:
    if dtype is None or not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return value if not isinstance(value, torch.Tensor) else value.detach().clone()
    return value.detach().to(dtype) if _lower(value.dtype, dtype) else value.detach().clone()


def _clone(value: Any) -> Any:
    """A copy with the same sizes and strides: the compiled code asserts the strides it was
    compiled for, and ``clone()`` makes a non-dense input (a slice, a transposed view) contiguous."""
    if not isinstance(value, torch.Tensor):
        return value
    value = value.detach()
    if value.numel() == 0 or value.is_sparse:
        return value.clone()
    # Copy the memory the view spans, then view it the same way (expanded, stride-0 inputs too).
    span = 1 + sum((size - 1) * stride for size, stride in zip(value.size(), value.stride()))
    memory = torch.as_strided(value, (span,), (1,), value.storage_offset()).clone()
    return memory.as_strided(value.size(), value.stride(), 0)


def _keep(into: dict[str, torch.Tensor], name: str, value: Any) -> None:
    """The node's value as its last hook saw it: a later kernel can finish a buffer in place (a
    scatter: one kernel copies, the next adds into it), and the copy outlives buffer reuse."""
    if isinstance(value, torch.Tensor):
        into[name] = value.detach().clone()


def _program_dtype(inputs: list[Any]) -> torch.dtype:
    """The lowest floating precision among the graph's inputs (float32 when none is floating)."""
    floating = [x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    return min(floating, key=lambda d: torch.finfo(d).bits, default=torch.float32)


def _from_random(gm: torch.fx.GraphModule) -> set[str]:
    """Nodes that draw random numbers, and every node computed from one."""
    tainted: set[str] = set()
    for node in gm.graph.nodes:
        if node.op == "call_function" and compat.is_seeded_random(node.target, tuple(node.args), dict(node.kwargs)):
            tainted.add(node.name)
        elif any(a.name in tainted for a in node.all_input_nodes):
            tainted.add(node.name)
    return tainted


def _rmse(reference: torch.Tensor, value: torch.Tensor) -> float:
    return float(torch.sqrt(torch.mean(torch.square(reference - value.to(torch.float64)))).item()) if value.numel() else 0.0


def _bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.shape == b.shape and bool(torch.equal(a.isnan(), b.isnan()))
            and bool(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))))


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
