"""Why a pipeline stage has no record: a table of rules, the first that holds gives the reason.

The order matters (a compile the run never finished says so before anything about its backend),
so the rules are read top to bottom, like the if-chain they replace; each is tested on its own
(tests/unit/test_missing_stages.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

from dynscope.model.records import Compile, Stage

AOT_STAGES = ("aot_joint", "aot_forward", "aot_backward", "aot_inference")
AOT_CACHE_HIT = "artifact:aotautograd_cache_hit"
FX_GRAPH_CACHE_HIT = "artifact:fx_graph_cache_hit"


@dataclass(frozen=True)
class MissingStage:
    """What the rules look at: the stage that has no record, and what its compile does have."""

    name: str  # canonical stage name
    graph: str | None  # "forward" | "backward" | "inference" for Inductor's per-graph stages
    compile: Compile
    recorded: Mapping[str, Stage]  # the compile's recorded stages, by key
    event_names: frozenset[str]  # the names of the compile's events
    probes: Mapping[str, bool]  # the run's probes: name -> installed
    probe_details: Mapping[str, str]  # why a probe was not installed

    @cached_property
    def has_aot(self) -> bool:
        return any(k in self.recorded for k in AOT_STAGES)

    @cached_property
    def has_inductor(self) -> bool:
        return any(s.name in ("post_grad", "output_code") for s in self.recorded.values())

    @cached_property
    def has_backward_stage(self) -> bool:
        return any(s.graph == "backward" for s in self.recorded.values())

    def probe_missing(self, probe: str) -> bool:
        return self.probes.get(probe) is False

    def why_probe_missing(self, probe: str, otherwise: str) -> str:
        return self.probe_details.get(probe) or otherwise


@dataclass(frozen=True)
class MissingRule:
    name: str  # what the rule recognises, for tests and for reading the table
    holds: Callable[[MissingStage], bool]
    reason: Callable[[MissingStage], str]


def _says(text: str) -> Callable[[MissingStage], str]:
    return lambda _: text


# A stage a cache hit skipped: the one flag that records it (explain --cold: caches off, in a private directory).
_FX_CACHE_HIT = "not run: cache hit (Inductor FX graph cache; explain --cold records it)"

MISSING_STAGE_RULES: tuple[MissingRule, ...] = (
    MissingRule("run ended mid-compile", lambda s: s.compile.status == "incomplete",
                _says("not reached: the run ended during this compile")),
    MissingRule("compile failed", lambda s: s.compile.status == "failed" and s.name != "bytecode",
                lambda s: f"not reached: the compile failed ({s.compile.fail_type})"),
    MissingRule("no bytecode log in this torch", lambda s: s.name == "bytecode" and s.probe_missing("log:bytecode"),
                lambda s: s.why_probe_missing("log:bytecode", "not recorded: this torch has no bytecode log")),
    MissingRule("bytecode not logged", lambda s: s.name == "bytecode",
                _says("not logged by torch for this frame")),
    MissingRule("no graph", lambda s: s.compile.graph_op_count == 0 or s.compile.status == "skipped",
                _says("no graph: Dynamo found no tensor operations to compile in this frame")),
    MissingRule("AOTAutograd cache hit", lambda s: s.name.startswith("aot_") and AOT_CACHE_HIT in s.event_names,
                _says("not run: cache hit (AOTAutograd cache; explain --cold records it)")),
    MissingRule("backend without AOTAutograd", lambda s: s.name.startswith("aot_"),
                _says('not run: the backend does not use AOTAutograd (e.g. backend="eager")')),
    MissingRule("no Inductor: FX graph cache hit", lambda s: not s.has_inductor and FX_GRAPH_CACHE_HIT in s.event_names,
                _says(_FX_CACHE_HIT)),
    MissingRule("backend without AOTAutograd or Inductor", lambda s: not s.has_inductor and not s.has_aot,
                _says('not run: the backend does not use Inductor (e.g. backend="eager")')),
    MissingRule("backend without Inductor", lambda s: not s.has_inductor,
                _says('not run: the backend does not use Inductor (e.g. backend="aot_eager")')),
    MissingRule("FX graph cache hit", lambda s: FX_GRAPH_CACHE_HIT in s.event_names
                and s.name in ("pre_grad", "post_grad", "scheduler_ir"),
                _says(_FX_CACHE_HIT)),
    # Only when no stage of the backward graph exists: with one, this stage is missing for its own reason.
    MissingRule("backward graph not compiled", lambda s: s.graph == "backward" and not s.has_backward_stage,
                _says("not compiled: Inductor compiles the backward graph on the first .backward(), which this run did not reach")),
    MissingRule("no scheduler IR log in this torch",
                lambda s: s.name == "scheduler_ir" and s.probe_missing("log:ir_pre_fusion"),
                lambda s: s.why_probe_missing("log:ir_pre_fusion", "not recorded: this torch has no scheduler IR log")),
    MissingRule("nothing fusible", lambda s: s.name == "scheduler_ir",
                _says("not logged: Inductor scheduled no fusible nodes for this graph")),
    MissingRule("pre-grad graph not logged", lambda s: s.name == "pre_grad", _says("not logged by this torch")),
)
OTHERWISE = "not emitted by torch for this compile"


def missing_reason(stage: MissingStage, rules: tuple[MissingRule, ...] = MISSING_STAGE_RULES) -> str:
    """The reason of the first rule that holds for the stage."""
    for rule in rules:
        if rule.holds(stage):
            return rule.reason(stage)
    return OTHERWISE


def matching_rule(stage: MissingStage) -> str | None:
    """The name of the rule that explains the stage (None: no rule, the fallback); for tests."""
    return next((rule.name for rule in MISSING_STAGE_RULES if rule.holds(stage)), None)
