"""dynscope fix without torch: which remedies a recorded run gets, and how a trial is judged.

Inputs are real captures of tests/programs/fix_model.py (tests/data/fix/README.md): its baseline
run and the trial run of capture_scalar_outputs, read through the model as ``dynscope fix`` reads
them (``run_view``), never through the summary JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from fix_stand import Occurrence, Stand

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.fix_document import Measured, ProblemRow, TrialRow, fix_cells
from dynscope.analysis.fix_problems import ProblemKey
from dynscope.analysis.fix_verdict import (
    Metrics,
    RunFacts,
    compare_outputs,
    judge,
    metrics_of,
    pick_combined,
)
from dynscope.analysis.fix_view import fix_problems, problem_counts
from dynscope.analysis.remedies import (
    check_expression,
    parse_try,
    remedies_for,
    select,
)
from dynscope.analysis.run_view import run_view
from dynscope.events import CallOutputs, CompileWith, DisableFunction, MarkDynamic, SetConfig, ShowOnly
from dynscope.model import Capture, CompileError, GuardFailure, Recompile, StackFrame
from dynscope.model.fix import Features, program_seconds, trial_features, trial_outputs

DATA = Path(__file__).resolve().parent.parent / "data" / "fix"


@dataclass(frozen=True)
class Recorded:
    """What fix reads from one run's capture."""

    facts: RunFacts
    problems: list  # FixProblem
    features: Features
    outputs: tuple[CallOutputs, ...]


def _read(name: str) -> Recorded:
    with Capture.open(str(DATA / name)) as capture:
        view = run_view(capture)
        problems = fix_problems(view)
        metrics = metrics_of(view, program_seconds(capture))
        outputs = tuple(trial_outputs(capture))
        facts = RunFacts(True, capture.run.exit_code, capture.run.signal, "total: 1\n", metrics,
                         problem_counts(problems), outputs)
        return Recorded(facts, problems, trial_features(capture), outputs)


@pytest.fixture(scope="module")
def baseline() -> Recorded:
    return _read("fix_model.baseline.dynscope")


@pytest.fixture(scope="module")
def scalar_outputs() -> Recorded:
    """The trial run of torch._dynamo.config.capture_scalar_outputs = True."""
    return _read("fix_model.scalar-outputs.dynscope")


def _by_kind(problems, kind):
    return [p for p in problems if p.kind == kind]


def _features(**configs) -> Features:
    return Features(configs=configs, functions=frozenset({"mark_dynamic", "compiler_disable"}),
                    compiled_callables=(("forward", "/p/model.py"),), program_root="/p")


def test_problems_of_the_recorded_run(baseline):
    problems = baseline.problems
    breaks = _by_kind(problems, "graph_break")
    assert [(p.line, p.count) for p in breaks] == [(21, 2), (23, 2)]
    assert "Tensor.item()" in breaks[0].detail and "builtin" in breaks[1].detail
    assert {p.family for p in breaks} == {"break"}
    recompiles = _by_kind(problems, "recompile")
    assert [p.function for p in recompiles][0] == "forward"
    assert recompiles[0].detail == "forward recompiled once: the size of x's dimension 0 changed: 4 → 8"
    assert len({p.key for p in problems}) == len(problems)
    assert baseline.facts.metrics.graph_breaks == 4 and baseline.facts.metrics.recompiles == 3


def test_remedies_chosen_from_the_recorded_facts(baseline):
    features = baseline.features
    item, printed = _by_kind(baseline.problems, "graph_break")
    forward = _by_kind(baseline.problems, "recompile")[0]
    assert [r.title for r in remedies_for(item, features)] == ["torch._dynamo.config.capture_scalar_outputs = True"]
    assert [r.action for r in remedies_for(printed, features)][0].to_json() == {"op": "logging_function",
                                                                                  "function": "print"}
    forward_remedies = remedies_for(forward, features)
    assert [type(r.action) for r in forward_remedies] == [MarkDynamic, MarkDynamic, CompileWith]
    assert [r.fallback for r in forward_remedies] == [False, True, False]  # maybe_mark_dynamic: if mark_dynamic fails
    assert forward_remedies[0].action == MarkDynamic("forward", forward.file, "x", 0, maybe=False)
    # the break is in the callable given to torch.compile: disabling it would only switch compilation off
    assert features.compiled_callables == (("forward", item.file),)
    root = item.file.rsplit("/", 1)[0]
    helper = replace(features, compiled_callables=(), program_root=root)  # were forward a helper: worth a trial
    assert [type(r.action) for r in remedies_for(item, helper)] == [SetConfig, DisableFunction]
    library = replace(helper, program_root="/elsewhere")  # not the program's own code: never disabled
    assert [type(r.action) for r in remedies_for(item, library)] == [SetConfig]


def test_features_decide(baseline):
    features = baseline.features
    item = _by_kind(baseline.problems, "graph_break")[0]
    assert remedies_for(item, replace(features, configs={**features.configs, "capture_scalar_outputs": True})) == []
    assert remedies_for(item, replace(features, configs={k: v for k, v in features.configs.items()
                                                         if k != "capture_scalar_outputs"})) == []
    forward = _by_kind(baseline.problems, "recompile")[0]
    bare = replace(features, functions=features.functions - {"mark_dynamic", "maybe_mark_dynamic"})
    assert [r.key for r in remedies_for(forward, bare)] == ["compile:dynamic=True"]


def test_each_remedy_tried_once_and_only_filters(baseline):
    selection = select(baseline.problems, baseline.features)
    keys = [r.key for r, _ in selection]
    assert len(keys) == len(set(keys))
    dynamic = dict((r.key, ps) for r, ps in selection)["compile:dynamic=True"]
    assert len(dynamic) == 3  # forward and both resume functions recompiled on the batch size
    assert {p.family for _, ps in select(baseline.problems, baseline.features, only="break") for p in ps} == {"break"}


def _recompile(compile_id, function, line, guard, expected, actual, file="/p/m.py"):
    return Recompile(compile_id, function, file, line, guard, (GuardFailure("0/0", guard, guard, expected, actual, None),))


def test_recompiles_split_by_cause():
    """A batch size and an int that change in one function are two problems with different remedies."""
    run = Stand(recompiles=[
        _recompile("0/1", "f", 3, "tensor 'x' size mismatch at index 0. expected 4, actual 6", "4", "6"),
        _recompile("0/2", "f", 3, "temperature == 2", "2", "3"),
        _recompile("1/1", "forward", 9, "self.n == 2", "2", "3")])
    features = Features(configs={"allow_unspec_int_on_nn_module": False}, functions=frozenset({"mark_dynamic"}))
    shape, value, module_int = fix_problems(run)
    assert value.detail == "f recompiled once: the value of temperature changed (Dynamo specialized on it): 2 → 3"
    assert [r.key for r in remedies_for(shape, features)] == ["mark_dynamic:/p/m.py:f:x:0", "compile:dynamic=True"]
    assert [r.key for r in remedies_for(value, features)] == ["compile:dynamic=True"]
    assert [r.title for r in remedies_for(module_int, features)][0] == \
        "torch._dynamo.config.allow_unspec_int_on_nn_module = True"


def _break(headline, file, line, function, code, *, gb_type=None, reason="", hints=()):
    return BreakGroup(headline, gb_type if gb_type is not None else headline, None, None, reason, None, tuple(hints),
                      StackFrame(file, line, function, code), (Occurrence(),))


def test_disable_for_a_helper_and_data_dependent_check():
    run = Stand(
        break_groups=[_break("Data-dependent branching", "/p/model.py", 9, "helper", "if x.sum() > 0:")],
        errors=[CompileError("1/0", "g", "/p/model.py", 30, "GuardOnDataDependentSymNode",
                             "Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1))",
                             "/p/model.py", 33)])
    features = _features(capture_scalar_outputs=False, suppress_errors=False)
    error, brk = fix_problems(run)
    assert error.kind == "error" and brk.kind == "graph_break"
    assert remedies_for(brk, features)[0].action == DisableFunction("/p/model.py", "helper", 9)
    check = remedies_for(error, features)[0]
    assert check.applies_as == "code" and not check.tried and isinstance(check.action, ShowOnly)
    assert check.patch.startswith("torch._check(u0 == 1)") and "/p/model.py:33" in check.patch
    assert check_expression("Ne(u0, 0)") == "u0 != 0" and check_expression("u0 < 4") == "u0 < 4"


def test_try_parses_literals_only():
    r = parse_try("torch._dynamo.config.specialize_int=True")
    assert r.action == SetConfig("torch._dynamo.config", "specialize_int", True)
    assert r.action.to_json() == {"op": "config", "target": "torch._dynamo.config.specialize_int", "value": True}
    for bad in ("specialize_int=True", "torch.x=__import__('os')", "torch.x", "torch.x={1, 2}"):
        with pytest.raises(ValueError):
            parse_try(bad)


# -- verdicts --------------------------------------------------------------------------------


def _without(run: Recorded, *, breaks_at=(), **facts) -> RunFacts:
    """The baseline with the breaks at these lines gone (and their count off the metrics)."""
    gone = [p for p in run.problems if p.kind == "graph_break" and p.line in breaks_at]
    problems = [p for p in run.problems if p not in gone]
    metrics = replace(run.facts.metrics, graph_breaks=run.facts.metrics.graph_breaks - sum(p.count for p in gone))
    return replace(run.facts, problems=problem_counts(problems), metrics=metrics, **facts)


def _item_key(run: Recorded) -> ProblemKey:
    return next(p.key for p in run.problems if p.line == 21 and p.kind == "graph_break")


def test_a_recorded_trial_is_fixed(baseline, scalar_outputs):
    """The real trial of capture_scalar_outputs against the real baseline: the .item() break is gone."""
    v = judge(baseline.facts, scalar_outputs.facts, [_item_key(baseline)], rtol=1e-5, atol=1e-5)
    assert (v.verdict, v.correct, v.max_abs_diff) == ("fixed", True, 0.0)


def _bumped(outputs: tuple[CallOutputs, ...], by: float) -> tuple[CallOutputs, ...]:
    first = outputs[0]
    leaf = first.leaves[0]
    leaf = replace(leaf, values=(leaf.values[0] + by, *leaf.values[1:]))
    return (replace(first, leaves=(leaf, *first.leaves[1:])), *outputs[1:])


def test_fixed_worse_no_change_failed(baseline):
    base = baseline.facts
    item_key = _item_key(baseline)
    assert judge(base, _without(baseline, breaks_at=(21,)), [item_key], rtol=1e-5, atol=1e-5).verdict == "fixed"
    assert judge(base, base, [item_key], rtol=1e-5, atol=1e-5).verdict == "no change"
    printed = next(p.key for p in baseline.problems if p.line == 23 and p.kind == "graph_break")
    more = replace(base, problems={**base.problems, printed: base.problems[printed] + 3},
                   metrics=replace(base.metrics, graph_breaks=base.metrics.graph_breaks + 3))
    assert judge(base, more, [item_key], rtol=1e-5, atol=1e-5).verdict == "worse"
    # problem gone but the numbers changed: failed, never fixed
    wrong = _without(baseline, breaks_at=(21,), outputs=_bumped(baseline.outputs, 0.5))
    v = judge(base, wrong, [item_key], rtol=1e-5, atol=1e-5)
    assert v.verdict == "failed" and v.correct is False and v.max_abs_diff == pytest.approx(0.5)
    # crashed, or printed something else
    assert judge(base, replace(base, exit_code=1), [item_key], rtol=0, atol=0).verdict == "failed"
    assert judge(base, replace(base, stdout="x"), [item_key], rtol=0, atol=0).verdict == "failed"
    assert judge(base, RunFacts(False, None, -9, "", None, {}, ()), [item_key], rtol=0, atol=0).verdict == "failed"


def test_improved_and_rescued(baseline):
    base = baseline.facts
    keys = [p.key for p in baseline.problems if p.kind == "graph_break"]
    assert judge(base, _without(baseline, breaks_at=(21,)), keys, rtol=1e-5, atol=1e-5).verdict == "improved"
    crashed = replace(base, exit_code=1, stdout="", outputs=base.outputs[:1])
    assert judge(crashed, base, keys, rtol=0, atol=0).verdict == "improved"


def test_outputs_tolerance_and_shapes(baseline):
    outputs = baseline.outputs
    assert compare_outputs(outputs, _bumped(outputs, 1e-7), rtol=1e-5, atol=1e-5).equal
    assert not compare_outputs(outputs, _bumped(outputs, 1e-7), rtol=0, atol=0).equal
    second = outputs[1]
    reshaped = (outputs[0], replace(second, leaves=(replace(second.leaves[0], shape=(1, 64)),)), *outputs[2:])
    assert not compare_outputs(outputs, reshaped, rtol=1, atol=1).equal
    assert not compare_outputs(outputs, outputs[:2], rtol=1, atol=1).equal  # a call went missing
    nan = (CallOutputs.from_json({"region": "r", "call": 1, "leaves": [
        {"kind": "tensor", "dtype": "float32", "shape": [1], "values": [None]}]}),)
    assert compare_outputs(nan, nan, rtol=0, atol=0).equal
    assert [CallOutputs.from_json(o.to_json()) for o in outputs] == list(outputs)  # the child's JSON round trip


def test_combined_covers_each_problem_once():
    m = Metrics(0, 0, 0, 0.0, None)
    results = [("a", "fixed", ["p1"], m), ("b", "fixed", ["p2"], m), ("c", "fixed", ["p3"], m),
               ("c", "fixed", ["p4"], m), ("d", "fixed", ["p3"], m), ("e", "failed", ["p5"], m),
               ("f", "improved", ["p5"], m)]
    assert pick_combined(results) == ["a", "b", "c", "f"]
    assert pick_combined([("x", "failed", ["p"], m), ("y", "worse", ["p"], m)]) == []


def test_a_rewrite_wins_a_tie_with_a_setting_and_nothing_more():
    m, fewer = Metrics(2, 0, 0, 0.0, None), Metrics(1, 0, 0, 0.0, None)
    is_rewrite = {"setting": False, "rewrite:keep-tensor": True}.__getitem__
    tie = [("setting", "fixed", ["p"], m), ("rewrite:keep-tensor", "fixed", ["p"], m)]
    assert pick_combined(tie) == ["setting"]  # table order, when nobody says which is code
    assert pick_combined(tie, kept_in_code=is_rewrite) == ["rewrite:keep-tensor"]
    # the better whole run still wins, and a fixed setting beats an improving rewrite
    assert pick_combined([("setting", "fixed", ["p"], fewer), ("rewrite:keep-tensor", "fixed", ["p"], m)],
                         kept_in_code=is_rewrite) == ["setting"]
    assert pick_combined([("setting", "fixed", ["p"], m), ("rewrite:keep-tensor", "improved", ["p"], m)],
                         kept_in_code=is_rewrite) == ["setting"]
    assert pick_combined([("setting", "fixed", ["p", "q"], m), ("rewrite:keep-tensor", "fixed", ["p"], m)],
                         kept_in_code=is_rewrite) == ["setting"]


def test_table_cells():
    row = TrialRow(ProblemRow("break", "/a/model.py", 41, None, ".item()", 1), "r", "k", "config", "",
                   Measured(Metrics(5, 2, 0, 21.0, None), 1), "fixed", "", Measured(Metrics(4, 2, 0, 19.0, None), 0),
                   correct=True, max_abs_diff=0.0)
    cells = fix_cells(row)
    assert cells["problem"] == ".item() at model.py:41"
    assert (cells["breaks"], cells["compile"], cells["outputs"], cells["run"]) == ("5 → 4", "21.0 → 19.0 s", "equal", "")


def test_disable_as_a_unified_diff(tmp_path):
    from dynscope.fix.patches import disable_diff

    source = "import torch\n\n\nclass M:\n    def helper(self, y):\n        if y.sum() > 0:\n            return y\n"
    (tmp_path / "m.py").write_text(source)
    diff = disable_diff(str(tmp_path / "m.py"), "helper", 6, str(tmp_path))
    assert diff.startswith("--- a/m.py\n+++ b/m.py\n") and "+    @torch.compiler.disable\n     def helper" in diff
    assert (tmp_path / "m.py").read_text() == source  # read, never written
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert disable_diff(str(tmp_path / "m.py"), "helper", 6, str(outside)) is None  # not the program's file


def test_dynamic_shapes_explained_in_the_problem_hints():
    from dynscope.analysis.problems import _data_dependent_hint, recompile_advice
    from dynscope.model import CompileError, GuardFailure

    shape = GuardFailure("0/0", "tensor 'x' size mismatch at index 0. expected 4, actual 8", None, "4", "8", None)
    assert recompile_advice(shape).startswith("dimension 0 of x changed (4 → 8): mark the dimension dynamic "
                                              "(torch._dynamo.mark_dynamic(x, 0) before the first call)")
    error = CompileError("1/0", "g", "/p/m.py", 30, "GuardOnDataDependentSymNode",
                         "Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1))", "/p/m.py", 33)
    assert "torch._check(u0 == 1) before line 33" in _data_dependent_hint(error)


def test_trials_keep_to_the_budget_and_jobs(tmp_path):
    """Scheduling with a stand-in for the process starter: at most `jobs` at once, a run that
    cannot start before the deadline is not run, one still running at the deadline is stopped."""
    import time

    from dynscope.fix.trials import Starter, TrialRun, run_all
    from dynscope.runner.program import Program

    class Timed(Starter):
        def __init__(self, seconds):
            self.seconds, self.running, self.most, self.stopped = seconds, set(), 0, []

        def start(self, program, run, deadline):
            (tmp_path / f"{run.name}.stdout").write_text("")
            assert (Path(run.workdir) / "data.txt").read_text() == "input"  # a scratch copy of its directory
            self.running.add(run.name)
            self.most = max(self.most, len(self.running))
            return run.name, time.time() + self.seconds[run.name]

        def poll(self, handle):
            name, end = handle
            if time.time() < end:
                return None
            self.running.discard(name)
            return 0

        def stop(self, handle):
            self.stopped.append(handle[0])
            self.running.discard(handle[0])
            return -9

        def finish(self, run, returncode, wall_s):
            pass

    program_dir = tmp_path / "program"
    program_dir.mkdir()
    (program_dir / "data.txt").write_text("input")
    runs = [TrialRun(name, [], str(tmp_path), cwd=str(program_dir)) for name in ("a", "b", "c", "d")]
    starter = Timed({"a": 0.3, "b": 1.5, "c": 10.0, "d": 0.1})
    done = []
    run_all(Program("script", "x.py"), runs, jobs=2, deadline=time.time() + 2.4, estimate_s=3.0,
            on_done=lambda r: done.append(r.name), starter=starter)
    a, b, c, d = runs
    assert starter.most == 2 and sorted(done) == ["a", "b", "c", "d"]
    assert c.facts.timed_out and starter.stopped == ["c"]  # still running at the deadline: stopped
    assert d.skipped and d.facts is None  # could not finish in time: never started
    assert not a.facts.timed_out and not a.facts.ran  # ran, but this stand-in wrote no capture
    assert not list(tmp_path.glob("*.cwd"))  # every scratch copy removed once its run ended


def test_stdout_check_can_be_left_out(baseline):
    base = baseline.facts
    timings = replace(base, stdout="step took 0.31 s\n")
    key = [p.key for p in baseline.problems][:1]
    assert judge(base, timings, key, rtol=0, atol=0).verdict == "failed"
    assert judge(base, timings, key, rtol=0, atol=0, check_stdout=False).verdict == "no change"


def test_a_public_setting_wins_a_tie_with_a_private_rewrite():
    """fix_model.py's print: reorderable_logging_functions and the rewrite through
    torch._higher_order_ops.print both fix it; the change to make is the public setting."""
    m, fewer = Metrics(2, 0, 0, 0.0, None), Metrics(1, 0, 0, 0.0, None)
    in_code = {"logging:print": False, "rewrite:traced-print": True, "rewrite:guard-logging": True}.__getitem__
    private = {"logging:print": False, "rewrite:traced-print": True, "rewrite:guard-logging": False}.__getitem__
    tie = [("logging:print", "fixed", ["p"], m), ("rewrite:traced-print", "fixed", ["p"], m)]
    assert pick_combined(tie, kept_in_code=in_code) == ["rewrite:traced-print"]  # nobody said which is private
    assert pick_combined(tie, kept_in_code=in_code, private=private) == ["logging:print"]
    # a public rewrite still wins its tie with the setting (the written diff alone reproduces it)
    assert pick_combined([*tie, ("rewrite:guard-logging", "fixed", ["p"], m)], kept_in_code=in_code,
                         private=private) == ["rewrite:guard-logging"]
    # the better whole run wins, private or not
    assert pick_combined([("logging:print", "fixed", ["p"], m), ("rewrite:traced-print", "fixed", ["p"], fewer)],
                         kept_in_code=in_code, private=private) == ["rewrite:traced-print"]
