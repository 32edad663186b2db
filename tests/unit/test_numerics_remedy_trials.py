"""dynscope numerics --try-remedies, its logic on recorded numbers (no torch): which remedies are tried
for a suspect, and how a trial is judged by the suspect's error (a verified case included)."""

from __future__ import annotations

from dynscope import events
from dynscope.analysis.remedies import numerics_problem
from dynscope.events import DisableFunction, SetConfig
from dynscope.model.fix import Features
from dynscope.numerics.criterion import NONFINITE_ERROR
from dynscope.numerics.remedy_trials import (
    Candidate,
    candidates,
    judge,
    numbers,
    outcome_json,
    remedies_exit_status,
)

INDUCTOR = "torch._inductor.config"
FEATURES = Features(configs={f"{INDUCTOR}.emulate_precision_casts": False, f"{INDUCTOR}.fallback_random": False},
                    functions=frozenset({"compiler_disable"}), compiled_callables=(("forward", "/p/model.py"),),
                    program_root="/p")


def _node(op: str = "aten.relu.default", function: str = "forward", *, name: str = "relu", eager: float = 3.6e-08,
          compiled: float = 0.83, suspect: bool = True) -> events.NumericsNode:
    return events.NumericsNode("0/0", "forward", 7, name, op, eager, compiled, "cpp_fused_relu_0", "/p/model.py:9",
                               (events.BreakFrame("/p/model.py", 9, function, "y = f(x)"),), suspect=suspect)


def _tried(node: events.NumericsNode, dtype: str, features: Features = FEATURES) -> list[tuple[str, object, str]]:
    problem = numerics_problem(node, dtype, ("forward", "/p/model.py"))
    return [(c.entry, c.remedy.action, c.expectation) for c in candidates(problem, features)]


def test_the_settings_are_tried_even_where_the_table_does_not_expect_them_to_help() -> None:
    # the injected relu bug: float32, not random, in the compiled frame (disabling it would compile nothing)
    assert _tried(_node(), "float32") == [
        ("emulate_precision_casts", SetConfig(INDUCTOR, "emulate_precision_casts", True), "long_shot"),
        ("fallback_random", SetConfig(INDUCTOR, "fallback_random", True), "long_shot")]
    # a bf16 suspect in a helper: precision casts and the disable are expected to help
    assert _tried(_node("aten.add.Tensor", "block"), "bfloat16") == [
        ("emulate_precision_casts", SetConfig(INDUCTOR, "emulate_precision_casts", True), "expected"),
        ("fallback_random", SetConfig(INDUCTOR, "fallback_random", True), "long_shot"),
        ("numerics_compiler_disable", DisableFunction("/p/model.py", "block", 9), "expected")]


def test_a_setting_this_torch_lacks_or_already_has_on_is_not_tried() -> None:
    assert _tried(_node(), "float32", Features()) == []
    on = Features(configs={f"{INDUCTOR}.emulate_precision_casts": True, f"{INDUCTOR}.fallback_random": False})
    assert [entry for entry, _, _ in _tried(_node(), "float32", on)] == ["fallback_random"]


def _checked(*nodes: events.NumericsNode, verdict: str) -> events.NumericsChecked:
    return events.NumericsChecked(verdict=verdict, graphs_checked=1, nodes=nodes, elapsed_s=0.5,
                                  first_suspect=next((i for i, n in enumerate(nodes) if n.suspect), None))


CANDIDATE = candidates(numerics_problem(_node("aten.add.Tensor", "block"), "bfloat16", ("forward", "/p/model.py")),
                       FEATURES)[0]


def test_a_remedy_that_brings_the_suspect_within_eagers_error_is_verified() -> None:
    suspect = _node("aten.add.Tensor", "block", name="add", eager=2e-3, compiled=0.5)
    before = numbers(_checked(suspect, verdict="suspect"), suspect, 4.0)
    fixed = _node("aten.add.Tensor", "block", name="add", eager=2e-3, compiled=3e-3, suspect=False)
    after = numbers(_checked(fixed, verdict="within"), suspect, 5.0)
    outcome = judge(CANDIDATE, before, after, applied=True)
    assert outcome.verified and remedies_exit_status([outcome]) == 0
    doc = outcome_json(outcome)
    assert doc["verified"] is True and doc["before"] == {"verdict": "suspect", "compiled_error": 0.5, "eager_error": 2e-3,
                                                         "suspect": True, "program_s": 4.0}
    assert doc["after"] == {"verdict": "within", "compiled_error": 3e-3, "eager_error": 2e-3, "suspect": False,
                            "program_s": 5.0}


def test_a_remedy_that_leaves_a_suspect_or_did_not_apply_is_not_verified() -> None:
    suspect = _node()
    before = numbers(_checked(suspect, verdict="suspect"), suspect, 4.0)
    same = numbers(_checked(suspect, verdict="suspect"), suspect, 4.2)
    still = judge(CANDIDATE, before, same, applied=True)
    assert not still.verified and still.after is not None and still.after.compiled_error == 0.83
    within = numbers(_checked(_node(suspect=False), verdict="within"), suspect, 4.0)
    assert not judge(CANDIDATE, before, within, applied=False).verified  # within, but not by this remedy
    nothing = judge(CANDIDATE, before, None, applied=True)
    assert not nothing.verified and "no Inductor graph" in nothing.note
    assert remedies_exit_status([still, nothing]) == 1 and remedies_exit_status([]) == 1


def test_the_suspect_is_found_in_the_trial_by_name_else_by_op_and_line() -> None:
    suspect = _node()
    renamed = _node(name="relu_1", compiled=NONFINITE_ERROR)
    found = numbers(_checked(renamed, verdict="suspect"), suspect, None)
    assert found.suspect is True and found.compiled_error is None  # non-finite reads as null, as in the document
    gone = numbers(_checked(_node("aten.add.Tensor", name="add", suspect=False), verdict="within"), suspect, None)
    assert gone.suspect is None and gone.verdict == "within"
    outcome = judge(Candidate("numerics_compiler_disable", CANDIDATE.remedy, "expected"),
                    numbers(_checked(suspect, verdict="suspect"), suspect, 1.0), gone, applied=True)
    assert outcome.verified and "no longer in the compiled graph" in outcome.note
