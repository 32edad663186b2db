"""Verdicts a user can trust (issue 22, item 4), on typed facts written by hand: a remedy judged on
the whole run, the combined change built from the winners, a break gone only when its line breaks
no more, a program that differs from itself, budget-stopped runs, trials spent where they can pay.
"""

from __future__ import annotations

from dataclasses import replace

from fix_stand import Occurrence, Stand

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.fix_document import Baseline, Combined, FixDocument, Measured, ProblemRow, TrialRow, combined_numbers, fix_cells
from dynscope.analysis.fix_problems import ProblemKey
from dynscope.analysis.fix_stdout import same_stdout, unstable_lines
from dynscope.analysis.fix_verdict import (
    STOPPED,
    Metrics,
    RunFacts,
    judge,
    left_at,
    pick_combined,
    unstable_between,
)
from dynscope.analysis.fix_view import fix_problems
from dynscope.analysis.remedies import remedies_conflict, remedies_for
from dynscope.events import CallOutputs, MarkDynamic
from dynscope.fix.judging import Judge, won_on
from dynscope.model import GuardFailure, Recompile, StackFrame
from dynscope.model.fix import Features

A = ProblemKey("break", "Unsupported Tensor.item() call", "/p/m.py", 21)  # the problem a remedy targets
B = ProblemKey("break", "Failed to trace builtin operator", "/p/m.py", 23)
R = ProblemKey("recompile", "size x 0", "/p/m.py", 19, "forward")


def _out(*values: float, call: int = 1) -> CallOutputs:
    return CallOutputs.from_json({"region": "1:Net", "call": call, "leaves": [
        {"kind": "tensor", "dtype": "float32", "shape": [1], "values": [v]} for v in values]})


def _run(problems: dict[str, int], breaks: int, recompiles: int, *, run_s: float | None = 1.0, steady: float | None = None,
         outputs: tuple[CallOutputs, ...] = (), stdout: str = "ok\n", timed_out: bool = False) -> RunFacts:
    metrics = Metrics(breaks, recompiles, 0, 1.0, run_s, breaks + 1, steady)  # a break splits a graph in two
    return RunFacts(True, 0, None, stdout, metrics, problems, outputs or (_out(1.0, 2.0),), timed_out=timed_out)


BASE = _run({A: 8, B: 14, R: 3}, 22, 3)


def test_a_remedy_that_removes_its_problem_while_the_run_grows_is_a_trade_off():
    # Switch with recompile_limit = 32: breaks 22 → 29, recompiles 3 → 12: the problem is gone, the run is worse
    grown = _run({B: 29, R: 12}, 29, 12, run_s=5.8)
    v = judge(BASE, grown, [A], rtol=0, atol=0)
    assert v.verdict == "trade-off"
    assert "the problem is gone, but" in v.why and "breaks 22 → 29" in v.why and "recompiles 3 → 12" in v.why
    # HuBERT: 11 → 11 breaks, the target gone and another break at another line in its place: not "improved"
    moved = ProblemKey("break", "Data-dependent branching", "/p/m.py", 40)
    same_total = _run({B: 14, R: 3, moved: 8}, 22, 3)
    v = judge(BASE, same_total, [A], rtol=0, atol=0)
    assert v.verdict == "trade-off" and "new: break Data-dependent branching" in v.why
    # a new problem elsewhere while the whole run has fewer breaks (torch.compiler.disable: the call is a break
    # of its own): improved, and said
    fewer = _run({B: 14, R: 3, moved: 2}, 16, 3)
    v = judge(BASE, fewer, [A], rtol=0, atol=0)
    assert v.verdict == "improved" and v.why == "the problem is gone; but new: break Data-dependent branching"
    # the same gain without growth elsewhere is fixed
    assert judge(BASE, _run({B: 14, R: 3}, 14, 3), [A], rtol=0, atol=0).verdict == "fixed"


def test_a_slower_run_is_a_trade_off_only_where_time_was_measured():
    base = replace(BASE, metrics=replace(BASE.metrics, steady_s_per_call=0.010))
    slower = _run({B: 14, R: 3}, 14, 3, steady=0.020)
    assert judge(base, slower, [A], rtol=0, atol=0).verdict == "fixed"  # times not measured (no --profile)
    v = judge(base, slower, [A], rtol=0, atol=0, compare_time=True)
    assert v.verdict == "trade-off" and v.why == "the problem is gone, but time per call 0.01 s → 0.02 s"
    # within the noise of a shared machine: still fixed
    assert judge(base, _run({B: 14, R: 3}, 14, 3, steady=0.011), [A], rtol=0, atol=0, compare_time=True).verdict == "fixed"


def test_a_slowdown_within_what_two_plain_runs_differ_by_is_not_slower():
    """HuBERT on a busy machine: the same unchanged program timed 9.2 and 12.5 ms a call. A trial at
    12.0 ms is within that; one past the slower plain run by 25% plus the spread (15.6 + 3.3 ms) is slower."""
    base = replace(BASE, metrics=replace(BASE.metrics, steady_s_per_call=0.0092))
    again = replace(BASE.metrics, steady_s_per_call=0.0125)
    within = _run({B: 14, R: 3}, 14, 3, steady=0.0120)
    judged = Judge(base, 0.0, 0.0, True, compare_time=True)
    assert judged.slower(within)  # against one plain run, 9.2 → 12.0 ms is slower
    assert judged(within, [A]).verdict == "trade-off"
    with_again = Judge(base, 0.0, 0.0, True, compare_time=True, plain_again=again)
    assert with_again(within, [A]).verdict == "fixed"
    assert with_again(_run({B: 14, R: 3}, 14, 3, steady=0.0160), [A]).verdict == "fixed"  # past 12.5 by 28%: within 25% + spread
    v = with_again(_run({B: 14, R: 3}, 14, 3, steady=0.0200), [A])
    assert v.verdict == "trade-off" and v.why == "the problem is gone, but time per call 0.0092 s → 0.02 s"
    # no second plain run asked for where times are not judged, or where nothing grew
    assert not Judge(base, 0.0, 0.0, True, compare_time=False).slower(within)
    assert not judged.slower(_run({B: 14, R: 3}, 14, 3, steady=0.0093))


def test_the_second_plain_run_keeps_its_time_and_says_the_spread():
    base = replace(BASE, metrics=replace(BASE.metrics, steady_s_per_call=0.0092))
    second = replace(BASE, metrics=replace(BASE.metrics, steady_s_per_call=0.0125))
    judged, said = Judge(base, 0.0, 0.0, True, compare_time=True).with_second(second, "b2.dynscope")
    assert judged.plain_again == second.metrics and judged.unstable is None
    assert said.message == ("a second plain run computed and printed the same: the differences are the remedies'; "
                            "its time per call moved 9.2 → 12.5 ms by itself: a trial is slower only past both")
    # times not judged: the second run's time is not used
    judged, said = Judge(base, 0.0, 0.0, True, compare_time=False).with_second(second, "b2.dynscope")
    assert judged.plain_again is None and said.message.endswith("the differences are the remedies'")


def test_a_trade_off_never_enters_the_combined_change():
    grown = _run({B: 29, R: 12}, 29, 12)
    v = judge(BASE, grown, [A], rtol=0, atol=0)
    assert won_on(v, BASE, grown, [A]) == []
    m = Metrics(0, 0, 0, 0.0, None)
    assert pick_combined([("limit", v.verdict, [A], grown.metrics), ("other", "fixed", [B], m)]) == ["other"]


def _shape_problem(function="forward", guard="tensor 'x' size mismatch at index 1. expected 8, actual 12"):
    run = Stand(recompiles=[Recompile("0/1", function, "/p/m.py", 19, guard,
                                       (GuardFailure("0/0", guard, guard, "8", "12", None),))])
    problem, = fix_problems(run)
    return problem


FEATURES = Features(configs={}, functions=frozenset({"mark_dynamic", "maybe_mark_dynamic"}),
                    compiled_callables=(("forward", "/p/m.py"),), program_root="/p")


def test_the_combined_change_keeps_the_fixed_remedy_and_the_better_of_two_that_conflict():
    mark, maybe, dynamic = remedies_for(_shape_problem(), FEATURES)
    assert (mark.key.startswith("mark_dynamic:"), maybe.fallback, dynamic.key) == (True, True, "compile:dynamic=True")
    assert remedies_conflict(mark, dynamic) and remedies_conflict(dynamic, maybe) and remedies_conflict(mark, maybe)
    assert not remedies_conflict(mark, mark)
    conflict = {r.key: r for r in (mark, maybe, dynamic)}

    def pick(results):
        return pick_combined(results, lambda a, b: remedies_conflict(conflict[a], conflict[b]))
    # Longformer: mark_dynamic(input_ids, 1) fixed its recompile (8 breaks left); dynamic=True covers that and
    # another recompile but its run ended with 40 breaks: the fixed remedy is kept, dynamic=True conflicts with it
    fixed_run, worse_run = Metrics(8, 0, 0, 1.0, None), Metrics(40, 0, 0, 1.0, None)
    results = [(mark.key, "fixed", [R], fixed_run), (dynamic.key, "improved", [R, ProblemKey("recompile", "other", None, None)], worse_run)]
    assert pick(results) == [mark.key]
    # both fixed: the better whole run is kept
    results = [(mark.key, "fixed", [R], Metrics(8, 2, 0, 1.0, None)), (dynamic.key, "fixed", [R], Metrics(2, 0, 0, 1.0, None))]
    assert pick(results) == [dynamic.key]


def test_a_break_is_gone_only_when_its_line_breaks_no_more():
    # BigBird: the line no longer breaks as "Data-dependent branching" but as a data-dependent guard
    same_line = ProblemKey("break", "Could not guard on data-dependent expression", "/p/m.py", 21)
    trial = _run({same_line: 8, B: 14, R: 3}, 22, 3)
    assert left_at(trial.problems, A) == 8 and left_at(trial.problems, R) == 3
    v = judge(BASE, trial, [A], rtol=0, atol=0)
    assert v.verdict == "no change" and "the line still breaks, for another reason" in v.why
    assert "Could not guard" in v.why
    assert left_at({ProblemKey("break", "x", "/p/m.py", 210): 1}, A) == 0  # another line of the same file is another site


def test_a_program_that_differs_from_itself_is_judged_on_what_is_stable():
    # Reformer calls torch.seed(): output 1 of its call differs between two plain runs
    first = _run(dict(BASE.problems), 22, 3, outputs=(_out(1.0, 2.0),))
    second = replace(first, outputs=(_out(1.0, 7.5),))
    unstable = unstable_between(first, second, rtol=1e-5, atol=1e-5)
    assert unstable.leaves == {("1:Net", 1, 1)} and not unstable.stdout
    assert unstable.say().startswith("outputs differ between two plain runs: 1:Net call 1 output 1: max abs diff 5.5")
    assert unstable.say().endswith("compared on what is stable")
    trial = _run({B: 14, R: 3}, 14, 3, outputs=(_out(1.0, -3.0),))
    assert judge(first, trial, [A], rtol=1e-5, atol=1e-5).verdict == "failed"  # without the second run
    assert judge(first, trial, [A], rtol=1e-5, atol=1e-5, unstable=unstable).verdict == "fixed"
    # a stable output that changes still fails
    wrong = replace(trial, outputs=(_out(1.5, -3.0),))
    assert judge(first, wrong, [A], rtol=1e-5, atol=1e-5, unstable=unstable).verdict == "failed"
    # the same through the fix's judge: it asks for the second run, then judges on what is stable
    j = Judge(first, 1e-5, 1e-5, check_stdout=True, compare_time=False)
    assert j.differs(trial) and not j.differs(first)
    j2, told = j.with_second(second, "/out/baseline-2.dynscope")
    assert j2(trial, [A]).verdict == "fixed" and told.differs and told.message == unstable.say()
    # a second run that agrees: the differences are the remedy's
    same, told = j.with_second(first, "/out/baseline-2.dynscope")
    assert same.unstable is None and same(trial, [A]).verdict == "failed" and told.differs == ()


def test_a_run_stopped_by_the_budget_shows_no_counts():
    stopped = _run({B: 25}, 25, 0, timed_out=True)
    v = judge(BASE, stopped, [A], rtol=0, atol=0)
    assert (v.verdict, v.why, v.correct) == ("not run", STOPPED, None)
    row = TrialRow(ProblemRow("break", "/p/m.py", 21, "f", ".item()", 8), "r", "k", "config", "",
                   Measured(BASE.metrics, 8), "not run", STOPPED)
    cells = fix_cells(row)
    assert (cells["breaks"], cells["recompiles"], cells["verdict"]) == ("22", "3", "not run")  # no "22 → 25"
    doc = FixDocument(("p.py",), "/p", None, "/o", Baseline(BASE.metrics, 0, "/o/b", 1.0), (), (row,),
                      Combined(("a", "b"), "", True, "not run", "the budget ran out before it could start"),
                      1, 1, 1.0, 1.0, True, "/dev/null", True, True, False, 0.0, 0.0)
    assert combined_numbers(doc, doc.combined) == "not run: the budget ran out before it could start"


def test_one_row_per_remedy_however_many_problems_it_serves():
    rows = (ProblemRow("recompile", "/p/m.py", 19, "forward", "forward recompiled", 1),
            ProblemRow("recompile", "/p/m.py", 21, "resume", "resume recompiled", 1))
    row = TrialRow(rows[0], "torch.compile(..., dynamic=True)", "compile:dynamic=True", "wrap", "", Measured(None, 2),
                   "fixed", "", problems=rows)
    assert fix_cells(row)["problem"] == "forward recompiled at m.py:19 (+1 more)"
    assert [p["line"] for p in row.to_json()["problems"]] == [19, 21]


def test_one_data_dependent_guard_on_one_line_is_one_problem():
    def group(symbol: str, n: int) -> BreakGroup:
        headline = f"Could not guard on data-dependent expression Eq({symbol}, 1)"
        return BreakGroup(headline, "", None, None, headline, None, (), StackFrame("/p/m.py", 30, "f", "if n == 1:"),
                          tuple(Occurrence() for _ in range(n)))
    problems = fix_problems(Stand(break_groups=[group(f"u{i}", 2) for i in range(6)]))
    assert len(problems) == 1 and problems[0].count == 12
    assert str(problems[0].key) == "break|Could not guard on data-dependent expression Eq(u?, 1)|/p/m.py|30"
    assert problems[0].key.site == ("/p/m.py", 30)


def test_trials_only_where_they_can_pay():
    # an inner function Dynamo compiled as a frame of its own: its inputs cannot be marked by the caller
    inner = _shape_problem(function="SwitchLayer.forward_inner")
    assert [r.key for r in remedies_for(inner, FEATURES)] == ["compile:dynamic=True"]
    # nothing recorded about the compiled callables: still worth a trial
    unknown = replace(FEATURES, compiled_callables=())
    assert [type(r.action) for r in remedies_for(inner, unknown)][:1] == [MarkDynamic]
    # a size guard on a keyword input gets mark_dynamic (of that keyword) and dynamic=True, as the summary suggests
    keyword = _shape_problem(guard="tensor 'kwargs['input_values']' size mismatch at index 1. expected 8, actual 12")
    mark, _maybe, dynamic = remedies_for(keyword, FEATURES)
    assert mark.action == MarkDynamic("forward", "/p/m.py", "kwargs['input_values']", 1, False)
    assert mark.title == "torch._dynamo.mark_dynamic(input_values, 1) before calling forward"
    assert dynamic.key == "compile:dynamic=True"
    old_style = _shape_problem(guard="tensor 'L['kwargs']['input_values']' size mismatch at index 1. expected 8, actual 12")
    assert remedies_for(old_style, FEATURES)[0].action == mark.action


def test_mark_dynamic_finds_a_keyword_input():
    from dynscope.fix.apply import _argument

    arguments = {"self": None, "kwargs": {"input_values": "tensor"}, "x": 1}
    assert _argument(arguments, "kwargs['input_values']") == "tensor" and _argument(arguments, "x") == 1
    assert _argument(arguments, "kwargs['missing']") is None and _argument(arguments, "x.y") is None


def test_speed_shown_before_and_after_where_measured():
    before, after = Metrics(5, 2, 0, 21.0, 3.0, 4, 0.0123), Metrics(4, 2, 0, 19.0, 2.5, 3, 0.00051)
    row = TrialRow(ProblemRow("break", "/p/m.py", 21, "f", ".item()", 1), "r", "k", "config", "", Measured(before, 1),
                   "fixed", "", Measured(after, 0))
    cells = fix_cells(row)
    assert (cells["graphs"], cells["compile"], cells["run"]) == ("4 → 3", "21.0 → 19.0 s", "12.3 → 0.51 ms/call")
    assert after.as_json()["graphs"] == 3 and after.as_json()["steady_s_per_call"] == 0.00051
    unmeasured = replace(row, before=Measured(replace(before, steady_s_per_call=None), 1))
    assert fix_cells(unmeasured)["run"] == "3.0 → 2.5 s"


def test_only_a_remedy_that_leaves_the_graph_is_moved_to_eager():
    # DBRX: capture_dynamic_output_shape_ops removes the nonzero break while the graphs stay at 4 (the
    # frame now traces on and compiles more): a setting made the code traceable, it did not move it out
    base = RunFacts(True, 0, None, "ok\n", Metrics(1, 0, 0, 1.0, 1.0, 4), {A: 1}, (_out(1.0, 2.0),))
    trial = replace(base, metrics=Metrics(0, 0, 0, 1.0, 1.0, 4), problems={})
    j = Judge(base, 1e-5, 1e-5, check_stdout=True, compare_time=False)
    assert j(trial, [A]).verdict == "fixed"
    # torch.compiler.disable on the helper: the same numbers mean the code runs in eager now
    moved = j(trial, [A], leaves_graph=True)
    assert moved.verdict == "moved to eager" and "graphs 4 → 4" in moved.why


def test_stdout_is_compared_line_by_line_leaving_out_only_what_moved():
    """A program that prints its time per step: a remedy that silences the stable "loss" line is
    never "outputs equal", though the time line differs between the two plain runs."""
    first = "step 1\ntime 0.31 s\nloss 2.0\n"
    second = "step 1\ntime 0.29 s\nloss 2.0\n"
    base = RunFacts(True, 0, None, first, Metrics(1, 0, 0, 1.0, 1.0, 4), {A: 1}, (_out(1.0, 2.0),))
    unstable = unstable_between(base, replace(base, stdout=second), rtol=0, atol=0)
    assert unstable.stdout and unstable.stdout_lines == frozenset({1})

    def verdict(stdout):
        trial = replace(base, stdout=stdout, problems={}, metrics=Metrics(0, 0, 0, 1.0, 1.0, 4))
        return judge(base, trial, [A], rtol=0, atol=0, unstable=unstable).verdict
    assert verdict("step 1\ntime 0.40 s\nloss 2.0\n") == "fixed"  # only the moving line moved
    assert verdict("step 1\ntime 0.40 s\n") == "failed"  # the stable line went missing
    assert verdict("step 1\ntime 0.40 s\nloss 2.5\n") == "failed"  # the stable line changed
    assert verdict("step 1\ntime 0.40 s\nloss 2.0\nextra\n") == "failed"  # a new line where nothing moved
    # without a second plain run, any difference fails
    assert judge(base, replace(base, stdout="step 1\ntime 0.40 s\nloss 2.0\n", problems={}), [A],
                 rtol=0, atol=0).verdict == "failed"


def test_lines_one_plain_run_added_may_come_and_go():
    first, second = "start\nend\n", "start\nwarning: slow\nend\n"
    moved = unstable_lines(first, second)
    assert same_stdout(first, "start\nwarning: slow\nend\n", moved)  # where the second run printed more
    assert same_stdout(first, first, moved)
    assert not same_stdout(first, "start\n", moved) and not same_stdout(first, "start\nend\nmore\n", moved)
