"""One compile's pipeline assembled from its events: each stage recorded (its variants, its FX
structure), the kernels of each Inductor graph, and the stages torch did not emit, each with
why (dynscope.model.missing_stages). The order and event names are dynscope.model.stages'."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dynscope import events as contract
from dynscope.model import stages as pipeline
from dynscope.model.fxgraph import FxGraph
from dynscope.model.kernels import KERNEL_INFO, OUTPUT_CODE, kernel_stage, read_kernels
from dynscope.model.missing_stages import MissingStage, missing_reason
from dynscope.model.output_code import graph_role
from dynscope.model.reading import RecordReader
from dynscope.model.records import Compile, Kernel, Stage
from dynscope.store.reader import Event

_MAIN_VARIANTS = ("graph", "after", "code", "original")
# What is read of a payload when only its first lines are needed (a graph's role, a bytecode
# dump's kind): a payload's gigabyte costs nothing there.
_HEAD_BYTES = 16 * 1024
_BYTECODE_TAP = contract.log_tap_kind("bytecode")


@dataclass(frozen=True)
class CompileDetails:
    """A compile's pipeline, in order (kernels last), and its kernels."""

    stages: tuple[Stage, ...]
    kernels: tuple[Kernel, ...]


@dataclass
class _Found:
    """The events of one recorded stage: variant -> event (a later attempt's wins)."""

    name: str
    graph: str | None
    variants: dict[str, Event]


def build_compile_details(records: RecordReader, compile_: Compile, probes: Mapping[str, bool],
                          probe_details: Mapping[str, str], fx_graph: Callable[[Stage], FxGraph | None]) -> CompileDetails:
    return _StageBuilder(records, compile_, probes, probe_details, fx_graph).build()


class _StageBuilder:
    def __init__(self, records: RecordReader, compile_: Compile, probes: Mapping[str, bool],
                 probe_details: Mapping[str, str], fx_graph: Callable[[Stage], FxGraph | None]) -> None:
        self.reader = records.reader
        self.compile = compile_
        self.probes = probes
        self.probe_details = probe_details
        self.fx_graph = fx_graph
        self.events = self.reader.events(compile_id=compile_.compile_id)
        graphs = [(records.parse(contract.FxGraphStructure, e), e) for e in self.events
                  if e.name == contract.FxGraphStructure.KIND]
        self.structure = {g.event_id: e.payload_hash for g, e in graphs if g is not None}
        self.names = frozenset(e.name for e in self.events)

    def build(self) -> CompileDetails:
        found: dict[str, _Found] = {}
        self._bytecode(found)
        for event in self.events:
            if event.name in pipeline.SINGLE_STAGE_EVENTS:
                name, variant = pipeline.SINGLE_STAGE_EVENTS[event.name]
                _add(found, name, None, variant, event)
        inductor_events = [e for e in self.events if e.name in pipeline.PER_GRAPH_EVENTS
                           or e.name in pipeline.SECTION_START_EVENTS or e.name.startswith("artifact:inductor_provenance")
                           or e.name == KERNEL_INFO]
        sections = pipeline.split_graph_sections(
            inductor_events, has_inference="aot_inference_graph" in self.names, explicit_role=self._role_of
        ) if inductor_events else []
        for section in sections:
            for event in section.events:
                if event.name in pipeline.PER_GRAPH_EVENTS:
                    name, variant = pipeline.PER_GRAPH_EVENTS[event.name]
                    _add(found, name, section.role, variant, event)
        stages = {key: self._stage(key, entry) for key, entry in found.items()}
        kernels: list[Kernel] = []
        for section in sections:
            kernels += read_kernels(self.reader, self.compile.compile_id, section, stages, self.fx_graph)
        ordered = self._with_missing(stages, [s.role for s in sections])
        ordered += [kernel_stage(k) for k in kernels]
        return CompileDetails(tuple(ordered), tuple(kernels))

    def _role_of(self, events: list[Event]) -> str | None:
        for event in events:
            if event.name == OUTPUT_CODE:  # the role is on the code's first lines
                return graph_role(self.reader.payload(event.payload_hash, limit=_HEAD_BYTES) or "")
        return None

    def _bytecode(self, found: dict[str, _Found]) -> None:
        """Original and modified bytecode of the final attempt, from the bytecode log tap
        (or the trace's resume-function artifacts)."""
        seen: dict[str, Event] = {}
        for event in self.events:
            variant: str | None
            if event.name == _BYTECODE_TAP:
                head = (self.reader.payload(event.payload_hash, limit=_HEAD_BYTES) or "")[:40]
                variant = "original" if head.startswith("ORIGINAL") else "modified" if head.startswith("MODIFIED") else None
            elif event.name.endswith("_ORIGINAL_BYTECODE") or event.name.endswith("_MODIFIED_BYTECODE"):
                variant = "original" if event.name.endswith("_ORIGINAL_BYTECODE") else "modified"
            else:
                continue
            if variant:
                seen[variant] = event
        for variant, event in sorted(seen.items()):
            _add(found, "bytecode", None, variant, event)

    def _stage(self, key: str, found: _Found) -> Stage:
        variants = found.variants
        # The stage's main text is the graph as that stage produced it ("after" its passes).
        main = next(variants[v] for v in (*_MAIN_VARIANTS, *variants) if v in variants)
        return Stage(
            compile_id=self.compile.compile_id,
            name=found.name,
            graph=found.graph,
            key=key,
            recorded=True,
            missing_reason=None,
            language=pipeline.STAGE_LANGUAGE[found.name],
            event_id=main.id,
            payload_hash=main.payload_hash,
            size=self.reader.payload_size(main.payload_hash),
            variants={v: e.payload_hash for v, e in variants.items() if e.payload_hash is not None},
            structure_hash=self.structure.get(main.id),
        )

    def _with_missing(self, stages: dict[str, Stage], roles: list[str | None]) -> list[Stage]:
        """Every stage of the pipeline in order; those torch did not emit say why."""
        ordered: list[Stage] = []
        for name, graph in pipeline.pipeline_slots(stages, roles):
            key = pipeline.stage_key(name, graph)
            if key in stages:
                ordered.append(stages[key])
            else:
                why = missing_reason(MissingStage(name, graph, self.compile, stages, self.names, self.probes, self.probe_details))
                ordered.append(Stage(self.compile.compile_id, name, graph, key, False, why, pipeline.STAGE_LANGUAGE[name]))
        return ordered


def _add(found: dict[str, _Found], name: str, graph: str | None, variant: str, event: Event) -> None:
    key = pipeline.stage_key(name, graph)
    found.setdefault(key, _Found(name, graph, {})).variants[variant] = event  # a later attempt wins
