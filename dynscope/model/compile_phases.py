"""Where each compile's seconds went, phase by phase, from torch's own timed regions.

torch logs every ``dynamo_timed`` region as a Chrome trace ``B``/``E`` pair (``chromium_event``)
tagged with its compile id. The regions nest (Inductor's lowering runs inside AOT's dispatch,
inside Dynamo's backend call); each instant of a compile is given to the innermost region that
names a phase, so nested phases are never counted twice, and time inside the compile that no
named region covers is "other". The phases then sum to the compile's traced length, which
agrees with torch's measured total (its compilation metrics) up to clock reads.
Pure: a function of the recorded events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

PhaseName = Literal["dynamo", "guards", "aot", "inductor", "lowering", "scheduling", "codegen", "compile",
                    "autotune", "backward", "other"]

PHASES: tuple[PhaseName, ...] = ("dynamo", "guards", "aot", "inductor", "lowering", "scheduling", "codegen",
                                 "compile", "autotune", "backward", "other")

PHASE_LABELS: dict[PhaseName, str] = {
    "dynamo": "Dynamo tracing",
    "guards": "guard building",
    "aot": "AOT dispatch and partition",
    "inductor": "Inductor passes",
    "lowering": "Inductor lowering",
    "scheduling": "Inductor scheduling",
    "codegen": "code generation",
    "compile": "C++/Triton compilation",
    "autotune": "autotuning",
    "backward": "backward compile",
    "other": "other",
}

# The regions that bound a compile: the forward (torch's entire_frame_compile_time_s) and the
# lazily compiled backward (its bwd_compilation_metrics).
_FORWARD_ROOT = "entire_frame_compile"
_BACKWARD_ROOT = "entire_backward_compile"

# torch's region names -> phase; the first rule whose needle the name starts with (or, for the
# substring rules, contains) wins. A region that names no phase passes its time to its parent.
_PREFIX_RULES: tuple[tuple[str, PhaseName], ...] = (
    ("bytecode_tracing", "dynamo"),
    ("compile_attempt_", "dynamo"),
    ("insert_deferred_runtime_asserts", "dynamo"),
    ("OutputGraph.", "dynamo"),
    ("build_guards", "guards"),
    ("create_aot_dispatcher_function", "aot"),
    ("aot_", "aot"),
    ("autograd_cache", "aot"),
    ("_recursive_joint_graph_passes", "aot"),
    ("min_cut_rematerialization_partition", "aot"),
    ("GraphLowering.run", "lowering"),
    ("Scheduler.codegen", "codegen"),
    ("Scheduler.", "scheduling"),
    ("GraphLowering.", "codegen"),
    ("code_gen", "codegen"),
    ("PythonWrapperCodegen", "codegen"),
    ("compile_file", "compile"),
    ("async_compile", "compile"),
    ("PyCodeCache.", "compile"),
    ("TritonBundler", "compile"),
    ("inductor_compile", "inductor"),
    ("fx_codegen_and_compile", "inductor"),
    ("compile_fx.", "inductor"),
    ("_recursive_pre_grad_passes", "inductor"),
    ("_recursive_post_grad_passes", "inductor"),
    ("additional_fake_tensor_prop", "inductor"),
    ("fx_graph_cache", "inductor"),
)
_SUBSTRING_RULES: tuple[tuple[str, PhaseName], ...] = (
    ("autotune", "autotune"),
    ("benchmark", "autotune"),
)


def phase_of_region(name: str) -> PhaseName | None:
    """The phase one of torch's timed regions belongs to (None: it passes its time to its parent)."""
    lowered = name.lower()
    for needle, phase in _SUBSTRING_RULES:
        if needle in lowered:
            return phase
    for prefix, phase in _PREFIX_RULES:
        if name.startswith(prefix):
            return phase
    return None


@dataclass(frozen=True)
class CompilePhases:
    """One compile's seconds by phase. ``seconds`` holds the phases that took time, in PHASES'
    order, "other" included; they sum to ``traced_s``, the compile's length in torch's timed
    regions (forward and backward)."""

    compile_id: str
    seconds: tuple[tuple[PhaseName, float], ...]
    traced_s: float
    # the same time as (phase, start, end) in torch's clock (microseconds), adjacent pieces of
    # one phase merged: what the timeline draws
    spans: tuple[tuple[PhaseName, float, float], ...] = ()

    def of(self, phase: PhaseName) -> float:
        return sum(s for p, s in self.seconds if p == phase)


@dataclass(frozen=True)
class _Event:
    name: str
    begins: bool
    ts_us: float


def _events_by_compile(events: Iterable[Mapping[str, object]]) -> dict[str, list[_Event]]:
    found: dict[str, list[_Event]] = {}
    for raw in events:
        name, ph, ts, args = raw.get("name"), raw.get("ph"), raw.get("ts"), raw.get("args")
        if not isinstance(name, str) or ph not in ("B", "E") or not isinstance(ts, (int, float)):
            continue
        # Regions without a compile id run on compile workers' threads; the waiting region of
        # the compile (async_compile.wait) covers their time.
        cid = args.get("compile_id") if isinstance(args, Mapping) else None
        if isinstance(cid, str):
            found.setdefault(cid, []).append(_Event(name, ph == "B", float(ts)))
    return found


def _split(events: list[_Event]) -> list[tuple[PhaseName, float, float]]:
    spans: list[tuple[PhaseName, float, float]] = []
    # Older torch (2.6) times no region for bytecode tracing: the compile's own time outside the
    # backend is Dynamo's there.
    root_phase: PhaseName = "other" if any(e.name == "bytecode_tracing" for e in events) else "dynamo"
    stack: list[tuple[str, PhaseName | None]] = []
    cursor = 0.0
    for event in events:
        if stack and event.ts_us > cursor:
            phase = _current_phase(stack, root_phase)
            if phase is not None:
                if spans and spans[-1][0] == phase and spans[-1][2] == cursor:
                    spans[-1] = (phase, spans[-1][1], event.ts_us)
                else:
                    spans.append((phase, cursor, event.ts_us))
        cursor = max(cursor, event.ts_us)
        if event.begins:
            stack.append((event.name, phase_of_region(event.name)))
        elif any(name == event.name for name, _ in stack):
            while stack and stack.pop()[0] != event.name:
                pass  # close what torch left open inside it
    return spans


def _current_phase(stack: list[tuple[str, PhaseName | None]], root_phase: PhaseName) -> PhaseName | None:
    """The phase of the innermost naming region, if the instant lies inside the compile's bounds."""
    names = [name for name, _ in stack]
    if _BACKWARD_ROOT in names:
        return "backward"
    if _FORWARD_ROOT not in names:
        return None  # before or after the compile proper (torch's outer "dynamo" region)
    for name, phase in reversed(stack):
        if phase is not None:
            return phase
        if name == _FORWARD_ROOT:
            return root_phase
    return "other"


def compile_phases(events: Iterable[Mapping[str, object]]) -> dict[str, CompilePhases]:
    """Per compile id, its phases (only compiles whose bounding regions torch logged)."""
    out: dict[str, CompilePhases] = {}
    for cid, evs in _events_by_compile(events).items():
        spans = _split(evs)
        if not spans:
            continue
        seconds: dict[PhaseName, float] = {}
        for phase, start, end in spans:
            seconds[phase] = seconds.get(phase, 0.0) + (end - start) / 1e6
        ordered = tuple((p, seconds[p]) for p in PHASES if seconds.get(p, 0.0) > 0.0)
        out[cid] = CompilePhases(cid, ordered, sum(s for _, s in ordered), tuple(spans))
    return out


def sum_phases(phases: Iterable[CompilePhases]) -> dict[PhaseName, float]:
    """Seconds by phase over several compiles (a frame's, a run's), in PHASES' order."""
    total: dict[PhaseName, float] = {}
    for p in phases:
        for name, s in p.seconds:
            total[name] = total.get(name, 0.0) + s
    return {name: total[name] for name in PHASES if name in total}
