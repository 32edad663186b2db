"""dynscope fix without torch: which remedies a recorded run gets, and how a trial is judged.

Inputs are recorded from a real run of tests/programs/fix_model.py (tests/data/fix/README.md).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from dynscope.analysis.fix_verdict import (
    Metrics,
    RunFacts,
    compare_outputs,
    fix_cells,
    judge,
    pick_combined,
)
from dynscope.analysis.remedies import (
    check_expression,
    parse_try,
    problem_counts,
    problems_from_summary,
    remedies_for,
    select,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "fix"


@pytest.fixture(scope="module")
def summary() -> dict:
    return json.loads((DATA / "fix_model.summary.json").read_text())


@pytest.fixture(scope="module")
def features() -> dict:
    return json.loads((DATA / "features-torch-2.13.json").read_text())


@pytest.fixture(scope="module")
def outputs() -> list:
    return json.loads((DATA / "fix_model.outputs.json").read_text())


def _by_kind(problems, kind):
    return [p for p in problems if p.kind == kind]


def test_problems_of_the_recorded_run(summary):
    problems = problems_from_summary(summary)
    breaks = _by_kind(problems, "break")
    assert [(p.line, p.count) for p in breaks] == [(21, 2), (23, 2)]
    assert "Tensor.item()" in breaks[0].detail and "builtin" in breaks[1].detail
    recompiles = _by_kind(problems, "recompile")
    assert [p.function for p in recompiles][0] == "forward"
    assert recompiles[0].detail == "forward recompiled once: the size of x's dimension 0 changed: 4 → 8"
    assert len({p.key for p in problems}) == len(problems)


def test_remedies_chosen_from_the_recorded_facts(summary, features):
    problems = problems_from_summary(summary)
    item, printed = _by_kind(problems, "break")
    forward = _by_kind(problems, "recompile")[0]
    assert [r.title for r in remedies_for(item, features)] == ["torch._dynamo.config.capture_scalar_outputs = True"]
    assert [r.action for r in remedies_for(printed, features)] == [{"op": "logging_function", "function": "print"}]
    forward_remedies = remedies_for(forward, features)
    assert [r.action["op"] for r in forward_remedies] == ["mark_dynamic", "mark_dynamic", "compile_kwargs"]
    assert [r.fallback for r in forward_remedies] == [False, True, False]  # maybe_mark_dynamic: if mark_dynamic fails
    assert forward_remedies[0].action == {"op": "mark_dynamic", "function": "forward", "file": forward.file,
                                          "arg": "x", "dim": 0, "maybe": False}
    # the break is in the callable given to torch.compile: disabling it would only switch compilation off
    assert features["compiled_callables"] == [["forward", item.file]]
    root = item.file.rsplit("/", 1)[0]
    helper = {**features, "compiled_callables": [], "program_root": root}  # were forward a helper: worth a trial
    assert [r.action["op"] for r in remedies_for(item, helper)] == ["config", "disable"]
    library = {**helper, "program_root": "/elsewhere"}  # not the program's own code: never disabled
    assert [r.action["op"] for r in remedies_for(item, library)] == ["config"]


def test_features_decide(summary, features):
    problems = problems_from_summary(summary)
    item = _by_kind(problems, "break")[0]
    assert remedies_for(item, {**features, "capture_scalar_outputs": True}) == []  # already on
    assert remedies_for(item, {k: v for k, v in features.items() if k != "capture_scalar_outputs"}) == []
    forward = _by_kind(problems, "recompile")[0]
    ops = [r.key for r in remedies_for(forward, {**features, "mark_dynamic": False, "maybe_mark_dynamic": False})]
    assert ops == ["compile:dynamic=True"]


def test_each_remedy_tried_once_and_only_filters(summary, features):
    problems = problems_from_summary(summary)
    selection = select(problems, features)
    keys = [r.key for r, _ in selection]
    assert len(keys) == len(set(keys))
    dynamic = dict((r.key, ps) for r, ps in selection)["compile:dynamic=True"]
    assert len(dynamic) == 3  # forward and both resume functions recompiled on the batch size
    assert {p.kind for _, ps in select(problems, features, only="break") for p in ps} == {"break"}


def test_recompiles_split_by_cause():
    """A batch size and an int that change in one function are two problems with different remedies."""
    doc = {"recompiles": [
        {"function": "f", "file": "/p/m.py", "line": 3, "compile_id": "0/1",
         "failures": [{"guard": "tensor 'x' size mismatch at index 0. expected 4, actual 6", "expected": "4",
                       "actual": "6"}]},
        {"function": "f", "file": "/p/m.py", "line": 3, "compile_id": "0/2",
         "failures": [{"guard": "temperature == 2", "expected": "2", "actual": "3"}]},
        {"function": "forward", "file": "/p/m.py", "line": 9, "compile_id": "1/1",
         "failures": [{"guard": "self.n == 2", "expected": "2", "actual": "3"}]}]}
    features = {"mark_dynamic": True, "maybe_mark_dynamic": False, "allow_unspec_int_on_nn_module": False}
    shape, value, module_int = problems_from_summary(doc)
    assert value.detail == "f recompiled once: the value of temperature changed (Dynamo specialized on it): 2 → 3"
    assert [r.key for r in remedies_for(shape, features)] == ["mark_dynamic:/p/m.py:f:x:0", "compile:dynamic=True"]
    assert [r.key for r in remedies_for(value, features)] == ["compile:dynamic=True"]
    assert [r.title for r in remedies_for(module_int, features)][0] == \
        "torch._dynamo.config.allow_unspec_int_on_nn_module = True"


def test_disable_for_a_helper_and_data_dependent_check():
    doc = {"compiles": [{"compile_id": "0/0", "function": "forward"}],
           "graph_breaks": [{"gb_type": "Data-dependent branching", "headline": "Data-dependent branching",
                             "file": "/p/model.py", "line": 9, "function": "helper", "code": "if x.sum() > 0:",
                             "count": 1, "compile_ids": ["0/0"], "hints": []}],
           "errors": [{"compile_id": "1/0", "function": "g", "file": "/p/model.py", "line": 30,
                       "fail_type": "GuardOnDataDependentSymNode",
                       "reason": "Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1))",
                       "user_file": "/p/model.py", "user_line": 33}]}
    features = {"compiler_disable": True, "capture_scalar_outputs": False, "suppress_errors": False,
                "compiled_callables": [["forward", "/p/model.py"]], "program_root": "/p"}
    problems = problems_from_summary(doc)
    error, brk = problems
    assert error.kind == "error" and brk.kind == "break"
    assert remedies_for(brk, features)[0].action == {"op": "disable", "file": "/p/model.py", "function": "helper",
                                                     "line": 9}
    check = remedies_for(error, features)[0]
    assert check.applies_as == "code" and not check.tried
    assert check.patch.startswith("torch._check(u0 == 1)") and "/p/model.py:33" in check.patch
    assert check_expression("Ne(u0, 0)") == "u0 != 0" and check_expression("u0 < 4") == "u0 < 4"


def test_try_parses_literals_only():
    r = parse_try("torch._dynamo.config.specialize_int=True")
    assert r.action == {"op": "config", "target": "torch._dynamo.config.specialize_int", "value": True}
    for bad in ("specialize_int=True", "torch.x=__import__('os')", "torch.x"):
        with pytest.raises(ValueError):
            parse_try(bad)


# -- verdicts --------------------------------------------------------------------------------


def _facts(summary, outputs, *, exit_code=0, stdout="total: 1\n", **kw) -> RunFacts:
    from dynscope.analysis.fix_verdict import metrics_from_summary

    return RunFacts(True, exit_code, None, stdout, metrics_from_summary(summary), problem_counts(summary),
                    outputs, **kw)


def _without(summary, *, breaks_at=(), recompiles_of=()):
    doc = copy.deepcopy(summary)
    gone = [g for g in doc["graph_breaks"] if g["line"] in breaks_at]
    doc["graph_breaks"] = [g for g in doc["graph_breaks"] if g["line"] not in breaks_at]
    doc["recompiles"] = [r for r in doc["recompiles"] if r["function"] not in recompiles_of]
    doc["totals"]["graph_breaks"] -= sum(g["count"] for g in gone)
    doc["totals"]["recompiles"] = len(doc["recompiles"])
    return doc


def test_fixed_worse_no_change_failed(summary, outputs):
    base = _facts(summary, outputs)
    item_key = next(p.key for p in problems_from_summary(summary) if p.line == 21)
    fixed = _facts(_without(summary, breaks_at=(21,)), outputs)
    assert judge(base, fixed, [item_key], rtol=1e-5, atol=1e-5).verdict == "fixed"
    assert judge(base, base, [item_key], rtol=1e-5, atol=1e-5).verdict == "no change"
    more = copy.deepcopy(summary)
    more["graph_breaks"][1]["count"] += 3
    more["totals"]["graph_breaks"] += 3
    assert judge(base, _facts(more, outputs), [item_key], rtol=1e-5, atol=1e-5).verdict == "worse"
    # problem gone but the numbers changed: failed, never fixed
    wrong = copy.deepcopy(outputs)
    wrong[0]["leaves"][0]["values"][0] += 0.5
    v = judge(base, _facts(_without(summary, breaks_at=(21,)), wrong), [item_key], rtol=1e-5, atol=1e-5)
    assert v.verdict == "failed" and v.correct is False and v.max_abs_diff == pytest.approx(0.5)
    # crashed, or printed something else
    assert judge(base, _facts(summary, outputs, exit_code=1), [item_key], rtol=0, atol=0).verdict == "failed"
    assert judge(base, _facts(summary, outputs, stdout="x"), [item_key], rtol=0, atol=0).verdict == "failed"
    assert judge(base, RunFacts(False, None, -9, "", None, {}, []), [item_key], rtol=0, atol=0).verdict == "failed"


def test_improved_and_rescued(summary, outputs):
    base = _facts(summary, outputs)
    keys = [p.key for p in problems_from_summary(summary) if p.kind == "break"]
    half = _facts(_without(summary, breaks_at=(21,)), outputs)
    assert judge(base, half, keys, rtol=1e-5, atol=1e-5).verdict == "improved"
    crashed = _facts(summary, outputs[:1], exit_code=1, stdout="")
    rescued = _facts(summary, outputs, stdout="total: 1\n")
    assert judge(crashed, rescued, keys, rtol=0, atol=0).verdict == "improved"


def test_outputs_tolerance_and_shapes(outputs):
    near = copy.deepcopy(outputs)
    near[0]["leaves"][0]["values"][0] += 1e-7
    assert compare_outputs(outputs, near, rtol=1e-5, atol=1e-5).equal
    assert not compare_outputs(outputs, near, rtol=0, atol=0).equal
    reshaped = copy.deepcopy(outputs)
    reshaped[1]["leaves"][0]["shape"] = [1, 64]
    assert not compare_outputs(outputs, reshaped, rtol=1, atol=1).equal
    assert not compare_outputs(outputs, outputs[:2], rtol=1, atol=1).equal  # a call went missing
    nan = [{"region": "r", "call": 1, "leaves": [{"kind": "tensor", "dtype": "float32", "shape": [1],
                                                    "values": [None]}]}]
    assert compare_outputs(nan, nan, rtol=0, atol=0).equal


def test_combined_covers_each_problem_once():
    m = Metrics(0, 0, 0, 0.0, None)
    results = [("a", "fixed", ["p1"], m), ("b", "fixed", ["p2"], m), ("c", "fixed", ["p3"], m),
               ("c", "fixed", ["p4"], m), ("d", "fixed", ["p3"], m), ("e", "failed", ["p5"], m),
               ("f", "improved", ["p5"], m)]
    assert pick_combined(results) == ["a", "b", "c", "f"]
    assert pick_combined([("x", "failed", ["p"], m), ("y", "worse", ["p"], m)]) == []


def test_table_cells():
    cells = fix_cells({"problem": {"kind": "break", "file": "/a/model.py", "line": 41, "detail": ".item()"},
                       "remedy": "r", "before": {"graph_breaks": 5, "recompiles": 2, "compile_s": 21.0},
                       "after": {"graph_breaks": 4, "recompiles": 2, "compile_s": 19.0}, "correct": True,
                       "max_abs_diff": 0.0, "verdict": "fixed"})
    assert cells["problem"] == ".item() at model.py:41"
    assert (cells["breaks"], cells["compile"], cells["outputs"]) == ("5 → 4", "21.0 → 19.0 s", "equal")


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


def test_stdout_check_can_be_left_out(summary, outputs):
    base = _facts(summary, outputs)
    timings = _facts(summary, outputs, stdout="step took 0.31 s\n")
    key = [p.key for p in problems_from_summary(summary)][:1]
    assert judge(base, timings, key, rtol=0, atol=0).verdict == "failed"
    assert judge(base, timings, key, rtol=0, atol=0, check_stdout=False).verdict == "no change"
