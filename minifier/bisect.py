"""Which stage of torch.compile fails: backends first, then the failing backend's subsystems.

Backends are tried in pipeline order, each adding one layer to the previous:
eager (the graph Dynamo captured, run as is) -> aot_eager (+ AOTAutograd tracing and
functionalization) -> aot_eager_decomp_partition (+ decompositions and the partitioner)
-> inductor. The first that fails names the culprit layer. Within it, torch's
CompilerBisector subsystems (passes, config changes, decompositions, lowerings; the list
comes from the installed torch) are switched off one at a time in torch's order; the first
whose removal makes the failure go away is bisected down to the single application (the
op lowered, the decomposition applied, the pass run) that breaks it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dynscope.minifier.checker import Checker
from dynscope.minifier.fragment import Fragment

BACKEND_CHAIN = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")

# What a failure first appearing with each backend says about the stack.
STAGE_OF_BACKEND = {
    "eager": ("dynamo", "Dynamo: the captured graph itself fails when run eagerly"),
    "aot_eager": ("aot_autograd", "AOTAutograd: tracing / functionalization"),
    "aot_eager_decomp_partition": ("aot_autograd", "AOTAutograd: decompositions / partitioner"),
    "inductor": ("inductor", "Inductor"),
}
SUBSYSTEM_TEXT = {
    "lowerings": "lowering",
    "pre_grad_passes": "pre-grad FX passes",
    "joint_graph_passes": "joint-graph FX passes",
    "post_grad_passes": "post-grad FX passes",
    "decomposition": "decomposition",
    "cudagraphs": "CUDA graphs",
}


@dataclass(frozen=True)
class BackendVerdict:
    culprit: str | None  # the first backend in the chain that fails (None: none of them)
    passed: tuple[str, ...]  # backends that ran cleanly before it

    @property
    def stage(self) -> str | None:
        return STAGE_OF_BACKEND.get(self.culprit, (self.culprit,))[0] if self.culprit else None


@dataclass(frozen=True)
class SubsystemVerdict:
    backend: str
    subsystem: str | None  # None: no subsystem's removal fixed it
    kind: str | None = None  # "bisect" | "config" | "binary"
    application: str | None = None  # the op / pass / decomposition that breaks it
    index: int | None = None  # which application, counting from 0
    note: str = ""
    skipped: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        if self.subsystem is None:
            return "no single subsystem (pass, lowering, ...) is to blame"
        text = SUBSYSTEM_TEXT.get(self.subsystem, self.subsystem)
        if self.kind == "config":
            return self.note
        if self.application:
            return f"{text} of {self.application}"
        return text


def chain_for(backend: str | None) -> tuple[str, ...]:
    """The backends to try, ending with the one that failed."""
    if backend in BACKEND_CHAIN:
        return BACKEND_CHAIN[: BACKEND_CHAIN.index(backend) + 1]
    return BACKEND_CHAIN if backend is None else (*BACKEND_CHAIN[:-1], backend)


def bisect_backends(checker: Checker, fragment: Fragment, chain: tuple[str, ...],
                    backend_spec: Callable[[str], dict[str, Any]], on_step: Callable[[str], None]) -> BackendVerdict:
    passed: list[str] = []
    for name in chain:
        on_step(f"backend {name}")
        if checker.fails(fragment, backend=backend_spec(name)):
            return BackendVerdict(name, tuple(passed))
        passed.append(name)
    return BackendVerdict(None, tuple(passed))


def bisect_subsystems(checker: Checker, fragment: Fragment, backend: dict[str, Any],
                      plan: list[dict[str, Any]], baseline_applications: dict[str, list[str]],
                      on_step: Callable[[str], None]) -> SubsystemVerdict:
    """Switch off torch's subsystems of ``backend`` one at a time (torch's order); bisect the
    first whose removal fixes the failure."""
    name = backend["name"]
    skipped = []
    for sub in plan:
        label = sub["name"]
        if label == "cudagraphs" and "cuda" not in fragment.devices():
            skipped.append(label)  # nothing to switch off on other devices
            continue
        on_step(f"{name}: without {SUBSYSTEM_TEXT.get(label, label)}")
        if sub["kind"] == "config":
            configs = _with_config(checker.settings.configs, sub["module"], sub["field"], sub["value"])
            if not checker.fails(fragment, backend=backend, configs=configs):
                note = f"setting {sub['module']}.{sub['field']} = {sub['value']!r} makes the failure go away"
                return SubsystemVerdict(name, label, "config", note=note, skipped=tuple(skipped))
            continue
        off = {"backend": name, "name": label, "limit": -1}
        if checker.fails(fragment, backend=backend, subsystem=off):
            continue
        if sub["kind"] != "bisect":
            return SubsystemVerdict(name, label, sub["kind"], skipped=tuple(skipped))
        applications = baseline_applications.get(f"{name}/{label}", [])
        index = _first_failing_application(checker, fragment, backend, label, len(applications), on_step)
        what = applications[index] if index is not None and index < len(applications) else None
        return SubsystemVerdict(name, label, "bisect", what, index, skipped=tuple(skipped))
    return SubsystemVerdict(name, None, skipped=tuple(skipped))


def _first_failing_application(checker: Checker, fragment: Fragment, backend: dict[str, Any], label: str,
                               count: int, on_step: Callable[[str], None]) -> int | None:
    """The smallest n such that allowing applications 0..n reproduces: application n breaks it."""
    if count == 0:
        return None
    low, high = 0, count - 1  # all applications allowed (limit count-1) is the failing baseline
    while low < high:
        middle = (low + high) // 2
        on_step(f"{backend['name']}: {SUBSYSTEM_TEXT.get(label, label)} {low}..{high}")
        if checker.fails(fragment, backend=backend, subsystem={"backend": backend["name"], "name": label, "limit": middle}):
            high = middle
        else:
            low = middle + 1
    return low


def _with_config(configs: dict[str, dict[str, Any]], module: str, key: str, value: Any) -> dict[str, dict[str, Any]]:
    merged = {m: dict(v) for m, v in configs.items()}
    merged.setdefault(module, {})[key] = value
    return merged
