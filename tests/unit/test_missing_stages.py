"""Why a stage is missing: each rule of dynscope.model.missing_stages on its own, their order, and
which stages a compile's pipeline lists (dynscope.model.stages.pipeline_slots). Torch-free."""

from __future__ import annotations

import dataclasses

import pytest

from dynscope.model.missing_stages import (
    AOT_CACHE_HIT,
    FX_GRAPH_CACHE_HIT,
    MISSING_STAGE_RULES,
    OTHERWISE,
    MissingStage,
    matching_rule,
    missing_reason,
)
from dynscope.model.records import Compile, CompileTimes, Stage
from dynscope.model.stages import STAGE_LANGUAGE, pipeline_slots, stage_key

OK = Compile(compile_id="0/0", frame_id=0, frame_compile_id=0, attempts=1, function="f", file="f.py", line=1,
             status="ok", fail_type=None, fail_reason=None, fail_file=None, fail_line=None, started=None,
             times=CompileTimes(), graph_op_count=3, graph_node_count=5, guard_count=2, restart_reasons=(), user_stack=())


def recorded(*keys: str) -> dict[str, Stage]:
    """Recorded stages by key ("post_grad.backward" is the backward graph's)."""
    stages = {}
    for key in keys:
        name, _, backward = key.partition(".")
        graph = "backward" if backward else ("forward" if name in ("post_grad", "scheduler_ir", "output_code") else None)
        stages[key] = Stage("0/0", name, graph, key, True, None, STAGE_LANGUAGE[name])
    return stages


def missing(name: str, graph: str | None = None, *, compile_: Compile = OK, stages: dict[str, Stage] | None = None,
            events: tuple[str, ...] = (), probes: dict[str, bool] | None = None,
            details: dict[str, str] | None = None) -> MissingStage:
    return MissingStage(name, graph, compile_, stages if stages is not None else recorded("dynamo"),
                        frozenset(events), probes or {}, details or {})


INDUCTOR = recorded("dynamo", "aot_forward", "post_grad", "output_code")

# (the rule expected to explain it, the missing stage, the reason users read)
CASES = [
    ("run ended mid-compile", missing("aot_joint", compile_=dataclasses.replace(OK, status="incomplete")),
     "not reached: the run ended during this compile"),
    ("compile failed", missing("post_grad", compile_=dataclasses.replace(OK, status="failed", fail_type="TorchRuntimeError")),
     "not reached: the compile failed (TorchRuntimeError)"),
    ("no bytecode log in this torch", missing("bytecode", probes={"log:bytecode": False},
                                              details={"log:bytecode": "not recorded: torch 2.6 has no bytecode log"}),
     "not recorded: torch 2.6 has no bytecode log"),
    ("bytecode not logged", missing("bytecode"), "not logged by torch for this frame"),
    ("no graph", missing("aot_forward", compile_=dataclasses.replace(OK, graph_op_count=0)),
     "no graph: Dynamo found no tensor operations to compile in this frame"),
    ("AOTAutograd cache hit", missing("aot_joint", events=(AOT_CACHE_HIT,)),
     "not run: cache hit (AOTAutograd cache; explain --cold records it)"),
    ("backend without AOTAutograd", missing("aot_forward"),
     'not run: the backend does not use AOTAutograd (e.g. backend="eager")'),
    ("no Inductor: FX graph cache hit", missing("post_grad", stages=recorded("dynamo", "aot_forward"), events=(FX_GRAPH_CACHE_HIT,)),
     "not run: cache hit (Inductor FX graph cache; explain --cold records it)"),
    ("backend without AOTAutograd or Inductor", missing("post_grad"),
     'not run: the backend does not use Inductor (e.g. backend="eager")'),
    ("backend without Inductor", missing("output_code", stages=recorded("dynamo", "aot_forward")),
     'not run: the backend does not use Inductor (e.g. backend="aot_eager")'),
    ("FX graph cache hit", missing("pre_grad", stages=INDUCTOR, events=(FX_GRAPH_CACHE_HIT,)),
     "not run: cache hit (Inductor FX graph cache; explain --cold records it)"),
    ("backward graph not compiled", missing("post_grad", "backward", stages=INDUCTOR),
     "not compiled: Inductor compiles the backward graph on the first .backward(), which this run did not reach"),
    ("no scheduler IR log in this torch", missing("scheduler_ir", "forward", stages=INDUCTOR, probes={"log:ir_pre_fusion": False}),
     "not recorded: this torch has no scheduler IR log"),
    ("nothing fusible", missing("scheduler_ir", "forward", stages=INDUCTOR),
     "not logged: Inductor scheduled no fusible nodes for this graph"),
    ("pre-grad graph not logged", missing("pre_grad", stages=INDUCTOR), "not logged by this torch"),
]


@pytest.mark.parametrize(("rule", "stage", "reason"), CASES, ids=[c[0] for c in CASES])
def test_each_rule_explains_its_stage(rule, stage, reason):
    assert matching_rule(stage) == rule
    assert missing_reason(stage) == reason


def test_every_rule_has_its_case():
    assert {c[0] for c in CASES} == {r.name for r in MISSING_STAGE_RULES}
    assert len({r.name for r in MISSING_STAGE_RULES}) == len(MISSING_STAGE_RULES)


def test_a_stage_no_rule_explains_says_torch_did_not_emit_it():
    stage = missing("output_code", "forward", stages=recorded("dynamo", "aot_forward", "post_grad"))
    assert matching_rule(stage) is None
    assert missing_reason(stage) == OTHERWISE == "not emitted by torch for this compile"


def test_the_first_rule_that_holds_wins():
    # A failed compile's AOT stages: "failed" comes before "the backend does not use AOTAutograd".
    failed = dataclasses.replace(OK, status="failed", fail_type="BackendCompilerFailed")
    assert missing_reason(missing("aot_forward", compile_=failed)) == "not reached: the compile failed (BackendCompilerFailed)"
    # but its bytecode was logged or not regardless of how the compile ended
    assert matching_rule(missing("bytecode", compile_=failed)) == "bytecode not logged"
    # A probe missing without a recorded why: the rule's own text.
    assert missing_reason(missing("bytecode", probes={"log:bytecode": False})) == "not recorded: this torch has no bytecode log"
    # With a backward stage recorded, another backward stage is missing for its own reason.
    with_backward = recorded("dynamo", "aot_forward", "post_grad", "output_code", "post_grad.backward")
    assert matching_rule(missing("scheduler_ir", "backward", stages=with_backward)) == "nothing fusible"


def test_pipeline_slots_for_training_inference_and_no_inductor():
    names = [name for name, _ in pipeline_slots(recorded("dynamo"), [])]
    assert names == ["bytecode", "dynamo", "pre_grad", "aot_joint", "aot_forward", "aot_backward", "aot_inference",
                     "post_grad", "scheduler_ir", "output_code"]
    assert all(graph is None for _, graph in pipeline_slots(recorded("dynamo"), []))
    # Training: no inference stage; Inductor's stages per graph, backward listed even before it compiled.
    training = pipeline_slots(recorded("dynamo", "aot_joint"), ["forward"])
    assert ("aot_inference", None) not in training
    assert [s for s in training if s[0] == "post_grad"] == [("post_grad", "forward"), ("post_grad", "backward")]
    # Inference: no training stages.
    inference = pipeline_slots(recorded("dynamo", "aot_inference"), ["inference"])
    assert not {"aot_joint", "aot_forward", "aot_backward"} & {name for name, _ in inference}
    assert ("output_code", "inference") in inference
    assert stage_key("post_grad", "backward") == "post_grad.backward" and stage_key("dynamo", "backward") == "dynamo"
