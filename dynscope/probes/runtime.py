"""Runtime profile (``explain --profile``): how often each compiled graph and each
``torch.compile``'d entry point ran, for how long, and what each graph break costs.

Measured, not sampled:
* graphs: Dynamo hands every backend-compiled graph back through
  ``OutputGraph.call_user_compiler``; we wrap the callable it returns, inside the
  ``disable`` Dynamo puts around it, so the wrapper is never traced. Two clock reads a call.
* graph breaks: a break's resume function is a frame of its own, compiled into its own
  graph. The break costs what runs between the end of the graph before the break and the
  start of the resume graph: the eager code at the break plus Dynamo's cache lookup of the
  resume frame. On the host clock, compiled time nested in between (a compiled function
  called at the break) is not counted twice. A break with no graph before it in its frame cannot be timed this
  way: its calls are counted as unmeasured.
* entry points: whatever ``torch.compile`` returns is timed per call, and calls during
  which Dynamo compiled are kept apart; a ``--vs-eager`` run times the same entry points
  with compilation off.

Graphs and entries whose inputs are CUDA tensors are timed with CUDA events on the
current stream (device time, never the wall time of asynchronous launches), resolved
when a snapshot is written.

The profile is written as cumulative snapshots (``dynscope:runtime``): every few seconds
while graphs run, so a killed program keeps its recent profile, and once at the end.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from dynscope.events import RuntimeSnapshot
from dynscope.probes import compat
from dynscope.probes.sink import Sink

RESUME_PREFIX = "torch_dynamo_resume_in_"
_FIRST_FLUSH_NS = 2_000_000_000  # the interval doubles after each snapshot, up to a minute
_MAX_FLUSH_NS = 60_000_000_000
_MAX_PENDING_EVENTS = 4096  # unresolved CUDA event pairs per timer before we wait for the GPU
# Cache lookup replays per entry point: every call for the first ones, then one in _LOOKUP_EVERY, up to
# the most kept (a median of these is the per-call figure; a replay costs one lookup's guard checks).
_LOOKUP_SAMPLES, _LOOKUP_EVERY, _MAX_LOOKUP_SAMPLES = 64, 16, 2048


def code_key(code: Any) -> tuple[str, str]:
    """(file, qualified name) of a code object: what a resume function's name points back to."""
    return code.co_filename, getattr(code, "co_qualname", code.co_name)


def original_frame(key: tuple[str, str]) -> tuple[str, str]:
    """The user function a resume function continues: ``C.torch_dynamo_resume_in_forward_at_88``
    → ``C.forward`` (torch names a resume of a resume after the original, or nests the names)."""
    file, qualname = key
    owner, _, name = qualname.rpartition(".")
    while name.startswith(RESUME_PREFIX) and "_at_" in name:
        name = name[len(RESUME_PREFIX):].rsplit("_at_", 1)[0]
    return file, f"{owner}.{name}" if owner else name


class _Timer:
    """Calls and seconds of one timed thing; on CUDA, event pairs waiting to be resolved."""

    __slots__ = ("calls", "seconds", "pending", "unmeasured", "compiling")

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self.pending: list[tuple[Any, Any]] = []
        self.unmeasured = 0
        self.compiling = 0  # gaps during which Dynamo compiled (the resume function, at its first call)

    def add_events(self, start: Any, end: Any) -> None:
        self.pending.append((start, end))
        if len(self.pending) >= _MAX_PENDING_EVENTS:
            self.resolve(wait=True)

    def resolve(self, *, wait: bool) -> None:
        still = []
        for start, end in self.pending:
            if wait:
                end.synchronize()
            elif not end.query():
                still.append((start, end))
                continue
            self.seconds += start.elapsed_time(end) / 1000.0
        self.pending = still


class _Graph(_Timer):
    """A compiled graph. Its first call is also kept apart: it pays for lazy work (loading
    kernels, benchmarking their configs, recording a CUDA graph) later calls don't."""

    __slots__ = ("compile_id", "key", "frame", "device", "first_seconds", "first_pair")

    def __init__(self, compile_id: str, key: tuple[str, str] | None, device: str) -> None:
        super().__init__()
        self.compile_id, self.key, self.device = compile_id, key, device
        self.frame = original_frame(key) if key is not None else None
        self.first_seconds: float | None = None
        self.first_pair: tuple[Any, Any] | None = None

    def resolve(self, *, wait: bool) -> None:
        if self.first_pair is not None:
            start, end = self.first_pair
            if wait:
                end.synchronize()
            if wait or end.query():
                self.first_seconds = start.elapsed_time(end) / 1000.0
                self.first_pair = None
        super().resolve(wait=wait)


class _Entry(_Timer):
    __slots__ = ("name", "file", "line", "kind", "compiling_calls", "compiling_seconds", "device", "lookup_ns")

    def __init__(self, name: str, file: str | None, line: int | None, kind: str) -> None:
        super().__init__()
        self.name, self.file, self.line, self.kind = name, file, line, kind
        self.compiling_calls = 0
        self.compiling_seconds = 0.0
        self.device = "cpu"
        self.lookup_ns: list[int] = []  # sampled replays of Dynamo's cache lookup (guard checks)

    def lookup_due(self) -> bool:
        """Every call until there are _LOOKUP_SAMPLES samples, then one call in _LOOKUP_EVERY."""
        n = len(self.lookup_ns)
        return n < _MAX_LOOKUP_SAMPLES and (n < _LOOKUP_SAMPLES or self.calls % _LOOKUP_EVERY == 0)


class RuntimeProfiler:
    """Times compiled graphs, the gaps a graph break leaves between them, and entry points."""

    def __init__(self, sink: Sink, *, forced_eager: bool = False) -> None:
        self._sink = sink
        self._forced_eager = forced_eager
        self._graphs: dict[str, _Graph] = {}
        self._breaks: dict[str, _Timer] = {}  # by the resume graph's compile id
        self._entries: dict[tuple[str, str | None, int | None], _Entry] = {}
        self._local = threading.local()
        self._lock = threading.Lock()
        self._started = time.perf_counter_ns()
        self._next_flush = self._started + _FIRST_FLUSH_NS
        self._interval = _FIRST_FLUSH_NS
        self._cuda_used = False
        self.times_graphs = False
        self._cudagraphs: dict[str, dict[str, int]] = {}  # compile id -> warmups, recordings, replays

    def count_cudagraph(self, kind: str, compile_id: str | None) -> None:
        counts = self._cudagraphs.setdefault(compile_id or "?", {"warmups": 0, "recordings": 0, "replays": 0})
        counts[kind] += 1

    # -- wrapping ------------------------------------------------------------------------------

    def wrap_graph(self, compiled_fn: Callable[..., Any], compile_id: str | None, code: Any,
                   example_inputs: list[Any]) -> Callable[..., Any]:
        if compile_id is None:
            return compiled_fn
        key = code_key(code) if code is not None else None
        device = "cuda" if compat.any_cuda_tensor(example_inputs) else "cpu"
        with self._lock:
            graph = self._graphs.setdefault(compile_id, _Graph(compile_id, key, device))
        resumes = key is not None and graph.frame != key
        gap = self._breaks.setdefault(compile_id, _Timer()) if resumes else None
        timed = self._timed_cuda_graph if device == "cuda" else self._timed_graph

        @functools.wraps(compiled_fn)
        def graph_call(*args: Any, **kwargs: Any) -> Any:
            return timed(compiled_fn, graph, gap, args, kwargs)

        return graph_call

    def _thread(self) -> Any:
        local = self._local
        if not hasattr(local, "ends"):
            # user function -> (end ns, compiled ns so far, compile attempts so far, end event or
            # None) of the last graph that ran for it (its own or one of its resume functions')
            local.ends = {}
            local.compiled_ns = 0
        return local

    def _timed_graph(self, fn, graph: _Graph, gap: _Timer | None, args, kwargs) -> Any:
        local = self._thread()
        start = time.perf_counter_ns()
        before = _gap_start(local, graph, gap)
        if gap is not None and before is not None:
            gap.seconds += (start - before[0] - (local.compiled_ns - before[1])) / 1e9
        try:
            return fn(*args, **kwargs)
        finally:
            end = time.perf_counter_ns()
            if not graph.calls:
                graph.first_seconds = (end - start) / 1e9
            graph.calls += 1
            graph.seconds += (end - start) / 1e9
            local.compiled_ns += end - start
            if graph.frame is not None:
                local.ends[graph.frame] = (end, local.compiled_ns, compat.compile_attempts(), None)
            if end >= self._next_flush:
                self.flush()

    def _timed_cuda_graph(self, fn, graph: _Graph, gap: _Timer | None, args, kwargs) -> Any:
        local = self._thread()
        self._cuda_used = True
        start = compat.cuda_event()
        before = _gap_start(local, graph, gap)
        if gap is not None and before is not None:
            gap.add_events(before[3], start)
        try:
            return fn(*args, **kwargs)
        finally:
            end = compat.cuda_event()
            graph.calls += 1
            graph.add_events(start, end)
            if graph.calls == 1:
                graph.first_pair = (start, end)
            if graph.frame is not None:
                local.ends[graph.frame] = (0, 0, compat.compile_attempts(), end)
            if time.perf_counter_ns() >= self._next_flush:
                self.flush()

    def wrap_entry(self, compiled: Any, original: Any) -> Any:
        """Time calls of what torch.compile returned (a module keeps its type: its forward is wrapped)."""
        name, file, line, kind = compat.describe_compiled_target(original)
        with self._lock:
            entry = self._entries.setdefault((name, file, line), _Entry(name, file, line, kind))
        target = compiled.forward if kind == "module" else compiled
        if not callable(target):
            return compiled
        try:
            replay_lookup = compat.cache_lookup_timer(original)
        except Exception:  # never let the profiler break the program
            replay_lookup = None

        @functools.wraps(target)
        def entry_call(*args: Any, **kwargs: Any) -> Any:
            compiles_before = compat.compile_attempts()
            cuda = compat.any_cuda_tensor(args)
            start_event = compat.cuda_event() if cuda else None
            start = time.perf_counter_ns()
            try:
                return target(*args, **kwargs)
            finally:
                wall = (time.perf_counter_ns() - start) / 1e9
                entry.calls += 1
                if compat.compile_attempts() != compiles_before:
                    entry.compiling_calls += 1  # wall time: compiling is host work
                    entry.compiling_seconds += wall
                elif cuda:
                    self._cuda_used = True
                    entry.device = "cuda"
                    entry.add_events(start_event, compat.cuda_event())
                else:
                    entry.seconds += wall
                compiled_now = entry.compiling_calls and compat.compile_attempts() != compiles_before
                if replay_lookup is not None and not compiled_now and entry.lookup_due():  # outside the timed call
                    try:
                        ns = replay_lookup(args, kwargs)
                    except Exception:
                        ns = None
                    if ns is not None:
                        entry.lookup_ns.append(ns)

        if kind == "module":
            compiled.forward = entry_call
            return compiled
        return entry_call

    # -- snapshots -----------------------------------------------------------------------------

    def flush(self, *, final: bool = False) -> None:
        """Write the cumulative profile. Waits for the GPU only at the end of the run."""
        now = time.perf_counter_ns()
        with self._lock:
            self._interval = min(self._interval * 2, _MAX_FLUSH_NS)
            self._next_flush = now + self._interval
            if final and self._cuda_used:
                compat.synchronize_cuda()
            try:
                snapshot = self.snapshot(wait=final, now_ns=now)
            except Exception as e:  # never let the profiler break the program
                self._sink.note_error(f"runtime profile: {type(e).__name__}: {e}")
                return
        self._sink.append_json(RuntimeSnapshot.KIND, RuntimeSnapshot(final=final).to_metadata(), snapshot)

    def snapshot(self, *, wait: bool, now_ns: int) -> dict[str, Any]:
        timers: list[_Timer] = [*self._graphs.values(), *self._breaks.values(), *self._entries.values()]
        for timer in timers:
            if timer.pending or getattr(timer, "first_pair", None) is not None:
                timer.resolve(wait=wait)
        return {
            "version": 1,
            "method": "cuda_events" if self._cuda_used else "perf_counter",
            "forced_eager": self._forced_eager,
            "wall_s": (now_ns - self._started) / 1e9,
            "graphs": [
                {"compile_id": g.compile_id, "file": g.key[0] if g.key else None,
                 "qualname": g.key[1] if g.key else None, "device": g.device,
                 "calls": g.calls, "seconds": g.seconds, "first_call_seconds": g.first_seconds,
                 "pending": len(g.pending)}
                for g in self._graphs.values()
            ],
            "breaks": [
                {"resume_compile_id": cid, "calls": t.calls, "seconds": t.seconds,
                 "unmeasured_calls": t.unmeasured, "compiling_calls": t.compiling, "pending": len(t.pending)}
                for cid, t in self._breaks.items()
            ],
            "cudagraphs": [{"compile_id": cid, **counts} for cid, counts in self._cudagraphs.items()],
            "entries": [
                {"name": e.name, "file": e.file, "line": e.line, "kind": e.kind, "device": e.device,
                 "calls": e.calls, "seconds": e.seconds, "compiling_calls": e.compiling_calls,
                 "compiling_seconds": e.compiling_seconds, "pending": len(e.pending),
                 "lookup_samples": len(e.lookup_ns), "lookup_median_s": _median_s(e.lookup_ns),
                 "lookup_mean_s": sum(e.lookup_ns) / len(e.lookup_ns) / 1e9 if e.lookup_ns else None}
                for e in self._entries.values()
            ],
        }


def _median_s(values: list[int]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return (ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2) / 1e9


def _gap_start(local: Any, graph: _Graph, gap: _Timer | None) -> tuple | None:
    """A resume graph starts: count the call through its break, and return the end of the graph
    before it when the gap can be measured (None: no graph before it, or Dynamo compiled in
    between, whose time is compile time and counted as such)."""
    if gap is None:
        return None
    before = local.ends.pop(graph.frame, None)
    gap.calls += 1
    if before is None:
        gap.unmeasured += 1
        return None
    if before[2] != compat.compile_attempts():
        gap.compiling += 1
        return None
    return before


def install_runtime_profiler(sink: Sink, *, forced_eager: bool = False) -> tuple[RuntimeProfiler, Callable[[], None]]:
    """Wrap compiled graphs and torch.compile's results; returns the profiler and the undo."""
    profiler = RuntimeProfiler(sink, forced_eager=forced_eager)
    undos = [compat.patch_torch_compile(profiler.wrap_entry)]
    undo_graphs = compat.patch_compiled_graphs(profiler.wrap_graph)
    profiler.times_graphs = undo_graphs is not None  # else: entry points only, no break costs
    if undo_graphs is not None:
        undos.append(undo_graphs)
    undo_cudagraphs = compat.patch_cudagraph_trees(profiler.count_cudagraph)
    if undo_cudagraphs is not None:
        undos.append(undo_cudagraphs)

    def undo() -> None:
        profiler.flush(final=True)
        for step in reversed(undos):
            step()

    return profiler, undo
