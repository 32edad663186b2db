"""The model of one capture: typed records, read lazily from the file.

``Capture.open(path)`` validates the file and reads only its meta table. Each accessor runs
narrow indexed queries the first time it is called and caches the result, so opening a
capture of a thousand compiles costs only what the first view actually shows.

``Capture`` is the one entry point the analyses and views use; what each record is read from
lives beside it: reading.py (events -> the contract's records, and what was not understood),
run_meta.py, compiles.py, graph_breaks.py, recompiles.py, failures.py, stage_builder.py
(a compile's pipeline, with missing_stages.py and kernels.py).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import cached_property

from dynscope import events as contract
from dynscope.errors import CaptureError, DynscopeError
from dynscope.model import stages as pipeline
from dynscope.model.caches import CacheLookup, read_cache_lookups, read_portable_calls, read_warm_start
from dynscope.model.collectives import Collective, parse_collectives
from dynscope.model.compile_modes import AutotuneResult, CudagraphSkip, read_autotuning, read_cudagraph_skips
from dynscope.model.compile_phases import CompilePhases, compile_phases
from dynscope.model.compiles import frames_of, interned_files, read_compiles
from dynscope.model.failures import FailedCompiles, FailureKind
from dynscope.model.fxgraph import FxGraph
from dynscope.model.graph_breaks import read_graph_breaks
from dynscope.model.guards import parse_guard_tree
from dynscope.model.json_values import JsonObject, as_object
from dynscope.model.numerics import Numerics, read_numerics
from dynscope.model.output_code import kernel_names
from dynscope.model.reading import RecordReader
from dynscope.model.recompiles import read_recompiles
from dynscope.model.records import (
    Compile,
    CompileError,
    Frame,
    GraphBreak,
    Guard,
    Kernel,
    ProgramException,
    Recompile,
    RecompileLimitHit,
    Run,
    SkippedFrame,
    Stage,
)
from dynscope.model.run_meta import read_run
from dynscope.model.runtime import RuntimeProfile, read_profile
from dynscope.model.stage_builder import CompileDetails, build_compile_details
from dynscope.store.reader import CaptureReader

MinifyResult = contract.MinifyResult  # the record as `dynscope minify` writes it
FixResult = contract.FixResult  # the record as `dynscope fix` writes it

_CACHE_LIMIT = 64  # compiles whose stages and kernels stay parsed in memory
_GUARD_TREE = "dynamo_cpp_guards_str"
_OUTPUT_CODE = "inductor_output_code"


class Capture:
    def __init__(self, reader: CaptureReader, *, beside: Callable[[str], Capture] | None = None) -> None:
        self.reader = reader
        self.path = reader.path
        self._beside = beside
        self.record_reader = RecordReader(reader)
        self._lock = threading.RLock()
        self._per_compile: OrderedDict[str, CompileDetails] = OrderedDict()

    @classmethod
    def open(cls, path: str, *, pinned: int | None = None, beside: Callable[[str], Capture] | None = None) -> Capture:
        """``pinned``: a descriptor already open on ``path`` (see CaptureReader); ``beside``: how a
        capture named beside this one is opened (dynscope mcp: through its door), instead of by name."""
        return cls(CaptureReader(path, pinned=pinned), beside=beside)

    def open_beside(self, name: str) -> Capture:
        """The capture file ``name`` (a file name, never a path) in this capture's directory."""
        if not name or name != os.path.basename(name) or name in (".", ".."):
            raise CaptureError(f"{name!r} is not a file name")
        if self._beside is not None:
            return self._beside(name)
        return Capture.open(os.path.join(os.path.dirname(self.path), name))

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def not_understood(self) -> dict[str, tuple[int, str]]:
        """Events the model could not read, per kind: (how many, why the first was not understood).
        Kinds the contract does not name count too. Reads every whole-run record first; what is
        read per compile (FX structures, with its stages) or by one view (torch's chromium events,
        by the timeline) counts once it has been read."""
        self.run, self.exception, self._compiles, self._graph_breaks, self._recompiles  # noqa: B018
        self.probe_errors(), self.minify_results(), self.graph_input_sizes(), self.dynamic_sources()
        self.numerics  # noqa: B018
        self._cache_lookups, self.portable_cache_calls(), self.warm_start()  # noqa: B018
        return self.record_reader.tally()

    # -- the run ---------------------------------------------------------------------------

    @cached_property
    def run(self) -> Run:
        return read_run(self.record_reader)

    @cached_property
    def exception(self) -> ProgramException | None:
        events = self.reader.events([contract.ProgramRaised.KIND])
        if not events:
            return None
        raised = self.record_reader.parse(contract.ProgramRaised, events[-1])
        if raised is None:
            return None
        return ProgramException(raised.type, raised.module, raised.message,
                                self.reader.payload(events[-1].payload_hash) or "")

    def probe_errors(self) -> list[str]:
        return [e.message for e, _ in self.record_reader.records(contract.ProbeError)]

    @cached_property
    def runtime(self) -> RuntimeProfile | None:
        """The run's measured runtime (``explain --profile``), or None when it was not profiled."""
        return read_profile(self.reader)

    # -- compiles and frames -----------------------------------------------------------------

    @cached_property
    def _compiles(self) -> dict[str, Compile]:
        return read_compiles(self.record_reader, interned_files(self.record_reader))

    def compiles(self) -> list[Compile]:
        return list(self._compiles.values())

    def compile(self, compile_id: str) -> Compile:
        try:
            return self._compiles[compile_id]
        except KeyError:
            known = ", ".join(list(self._compiles)[:12]) or "none"
            raise DynscopeError(f"no compile {compile_id} in {self.path} (compiles: {known})") from None

    def frames(self) -> list[Frame]:
        return frames_of(self._compiles)

    def chromium_events(self) -> list[JsonObject]:
        """torch's timed regions (Chrome trace events it logs as ``chromium_event``), in order."""
        out = []
        for event in self.reader.events(["chromium_event"]):
            try:
                out.append(contract.chrome_event(self.reader.payload(event.payload_hash)))
            except contract.NotUnderstood as e:
                self.record_reader.not_parsed(e, event.id)
        return out

    @cached_property
    def _compile_phases(self) -> dict[str, CompilePhases]:
        return compile_phases(self.chromium_events())

    def compile_phases(self) -> dict[str, CompilePhases]:
        """Per compile id, where its seconds went by phase (dynscope.model.compile_phases); a compile
        whose timed regions torch did not log has none."""
        return self._compile_phases

    def dynamic_sources(self) -> dict[str, tuple[str, ...]]:
        """Per compile, the values Dynamo made symbolic (torch's create_symbol events), e.g.
        "L['x'].size()[0]": how a recompile after a shape change made that dimension dynamic."""
        found: dict[str, list[str]] = {}
        for row, symbol in self.record_reader.rows(contract.SymbolCreated):
            if row.compile_id is not None and symbol.source is not None:
                found.setdefault(row.compile_id, []).append(symbol.source)
        return {cid: tuple(dict.fromkeys(sources)) for cid, sources in found.items()}

    def graph_input_sizes(self) -> dict[str, JsonObject]:
        """Per compile, the sizes of its Dynamo graph's inputs (torch logs them with the graph)."""
        found: dict[str, JsonObject] = {}
        for graph, event in self.record_reader.records(contract.DynamoOutputGraph):
            if event.compile_id is not None and graph.sizes is not None:
                found[event.compile_id] = {k: v for k, v in as_object(graph.sizes).items() if k.startswith(("l_", "L_"))}
        return found

    def cache_events(self) -> list[tuple[str | None, str]]:
        """(compile id, "aotautograd_cache_hit" / "fx_graph_cache_miss" / ...) in the order torch logged them."""
        names = [f"artifact:{layer}_cache_{what}" for layer in ("aotautograd", "fx_graph")
                 for what in ("hit", "miss", "bypass")]
        return [(e.compile_id, e.name.removeprefix("artifact:")) for e in self.reader.events(names)]

    @cached_property
    def _cache_lookups(self) -> list[CacheLookup]:
        return read_cache_lookups(self.record_reader)

    def cache_lookups(self) -> list[CacheLookup]:
        """Every cache lookup torch logged (each layer of each compile: hit, miss or bypass, with
        the key's components), in order (dynscope.model.caches)."""
        return list(self._cache_lookups)

    def portable_cache_calls(self) -> list[contract.CacheArtifactsCall]:
        """The program's save_cache_artifacts / load_cache_artifacts calls."""
        return read_portable_calls(self.record_reader)

    def warm_start(self) -> contract.WarmStart | None:
        """``explain --warm``: the cold run this capture's warm run followed, or None."""
        return read_warm_start(self.record_reader)

    def autotuning(self) -> list[AutotuneResult]:
        """mode="max-autotune": every autotuned op, its benchmarked choices and the one picked."""
        return read_autotuning(self.reader, self.record_reader.not_parsed)

    def cudagraph_skips(self) -> list[CudagraphSkip]:
        """mode="reduce-overhead": why CUDA graphs were not used, per compile where torch says."""
        reasons = {c.compile_id: c.cudagraph_skip_reason for c in self.compiles() if c.cudagraph_skip_reason}
        return read_cudagraph_skips(self.reader, reasons, [(c.compile_id, c.function) for c in self.compiles()])

    def collectives(self) -> list[Collective]:
        """Collectives each Dynamo graph issues, in compile order (from the printed FX graphs)."""
        found: list[Collective] = []
        for event in self.reader.events(["dynamo_output_graph"]):
            text = self.reader.payload(event.payload_hash) or ""
            if "c10d_functional" in text:
                found += parse_collectives(text, event.compile_id)
        return found

    # -- graph breaks, recompiles, failures ---------------------------------------------------

    @cached_property
    def _graph_breaks(self) -> list[GraphBreak]:
        return read_graph_breaks(self.record_reader, self._compiles, self.run.probes)

    def graph_breaks(self) -> list[GraphBreak]:
        return list(self._graph_breaks)

    @cached_property
    def _recompiles(self) -> list[Recompile]:
        return read_recompiles(self.record_reader, self._compiles)

    def recompiles(self) -> list[Recompile]:
        return list(self._recompiles)

    @cached_property
    def _failed(self) -> FailedCompiles:
        return FailedCompiles(self._compiles.values(), self.exception)

    def errors(self) -> list[CompileError]:
        """Compiles that failed the program or its backend (not the frames Dynamo skipped)."""
        return self._failed.errors()

    def skipped_frames(self) -> list[SkippedFrame]:
        """Frames Dynamo gave up on and ran in eager, the program unharmed (recompile-limit hits
        are listed apart: ``recompile_limit_hits``)."""
        return self._failed.skipped_frames()

    def recompile_limit_hits(self) -> list[RecompileLimitHit]:
        return self._failed.recompile_limit_hits()

    def failure_kind(self, c: Compile) -> FailureKind | None:
        """"error" | "skipped" | "limit" for a failed compile, None for the others."""
        return self._failed.kind(c)

    def minify_results(self) -> list[MinifyResult]:
        """What `dynscope minify` found for this run (it records its result into the capture)."""
        return [r for r, _ in self.record_reader.records(MinifyResult)]

    @cached_property
    def numerics(self) -> Numerics | None:
        """What `dynscope numerics` found for this run (it records its check into the capture); None: not checked."""
        return read_numerics(self.record_reader)

    def fix_results(self) -> list[FixResult]:
        """The remedies `dynscope fix` proved for this run's problems (it records them into the capture)."""
        return [r for r, _ in self.record_reader.records(FixResult)]

    # -- per compile: guards, stages, kernels ------------------------------------------------

    def guards(self, compile_id: str) -> list[Guard]:
        events = self.reader.events([_GUARD_TREE], compile_id=compile_id)
        if not events:
            return []
        return parse_guard_tree(compile_id, self.reader.payload(events[-1].payload_hash) or "")

    def guard_count(self, compile_id: str) -> int | None:
        """How many guards a compile has: the checks of its recorded guard tree (what every view
        lists), else torch's own count from its metrics (which leaves some tree checks out)."""
        if self.reader.events([_GUARD_TREE], compile_id=compile_id):
            return len(self.guards(compile_id))
        return self.compile(compile_id).guard_count

    def stages(self, compile_id: str) -> list[Stage]:
        return list(self._compile_details(compile_id).stages)

    @cached_property
    def _recorded_stage_names(self) -> dict[str, set[str]]:
        event_stage = {e: s for e, (s, _) in {**pipeline.SINGLE_STAGE_EVENTS, **pipeline.PER_GRAPH_EVENTS}.items()}
        found: dict[str, set[str]] = {}
        for cid, name in self.reader.compile_event_names(
            [*event_stage, contract.log_tap_kind("bytecode")], name_like="artifact:%_BYTECODE"
        ):
            stage = event_stage.get(name, "bytecode")
            found.setdefault(cid, set()).add(stage)
        return found

    def recorded_stage_names(self, compile_id: str) -> list[str]:
        """Canonical names of the stages recorded for a compile, in pipeline order (one cheap query
        for the whole capture, so a summary of thousands of compiles stays fast)."""
        recorded = self._recorded_stage_names.get(compile_id, set())
        return [name for name in pipeline.CANONICAL_STAGES if name in recorded]

    def stage(self, compile_id: str, key: str) -> Stage:
        stages = self._compile_details(compile_id).stages
        for stage in stages:
            if stage.key == key:
                return stage
        keys = ", ".join(s.key for s in stages)
        raise DynscopeError(f"compile {compile_id} has no stage {key!r} (stages: {keys})")

    def output_code_index(self) -> dict[str, tuple[int, list[str]]]:
        """Per compile id: its output code's bytes and its kernels' names, for whole-run views
        (one query, no stages built; a compile's forward and backward code together)."""
        index: dict[str, tuple[int, list[str]]] = {}
        for event in self.reader.events([_OUTPUT_CODE]):
            if event.compile_id is None or event.payload_hash is None:
                continue
            size, names = index.get(event.compile_id, (0, []))
            code = self.reader.payload(event.payload_hash) or ""
            index[event.compile_id] = (size + self.reader.payload_size(event.payload_hash), names + kernel_names(code))
        return index

    def kernels(self, compile_id: str) -> list[Kernel]:
        return list(self._compile_details(compile_id).kernels)

    def stage_text(self, stage: Stage, variant: str | None = None) -> str:
        """The stage's text (IR, code). ``variant`` picks another view, e.g. "before" / "modified"."""
        if stage.name == "kernel":
            for kernel in self.kernels(stage.compile_id):
                if kernel.key == stage.key:
                    return kernel.source
        digest = stage.variants.get(variant) if variant else stage.payload_hash
        if variant and digest is None:
            raise DynscopeError(f"stage {stage.key} has no {variant!r} view (views: {', '.join(stage.variants)})")
        return self.reader.payload(digest) or ""

    def fx_graph(self, stage: Stage) -> FxGraph | None:
        if stage.structure_hash is None:
            return None
        return FxGraph(as_object(self.reader.json_payload(stage.structure_hash)))

    def _compile_details(self, compile_id: str) -> CompileDetails:
        """A compile's stages and kernels, built once and kept for the last _CACHE_LIMIT compiles used."""
        with self._lock:
            if compile_id in self._per_compile:
                self._per_compile.move_to_end(compile_id)
                return self._per_compile[compile_id]
        run = self.run
        details = build_compile_details(self.record_reader, self.compile(compile_id), run.probes, run.probe_details,
                                        self.fx_graph)
        with self._lock:
            self._per_compile[compile_id] = details
            while len(self._per_compile) > _CACHE_LIMIT:
                self._per_compile.popitem(last=False)
        return details
