"""The plan of one ``dynscope fix`` (dynscope/fix/plan.py) from recorded captures, without torch: which
trials run first, which wait as fallbacks, what the combined guess is, when a second plain run is
needed, when the guess is dead, which fallbacks still run and which trade-offs are stacked; and the
one rule of the speculative runs (dynscope/fix/speculation.py).

Inputs: the recorded baseline of tests/programs/fix_model.py and its trial of
capture_scalar_outputs (tests/data/fix/README.md), read as ``dynscope fix`` reads them.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from dynscope.analysis.fix_verdict import RunFacts, metrics_of
from dynscope.analysis.fix_view import fix_problems, problem_counts
from dynscope.analysis.remedies import FixProblem, Remedy, select
from dynscope.analysis.run_view import run_view
from dynscope.events import ChangeSource, SetConfig
from dynscope.fix.judging import Judge
from dynscope.fix.plan import (
    DIFFERS,
    loses_the_guess,
    needless_in_eager,
    plan_trials,
    second_baseline_reason,
    source_alternative,
    stack_candidates,
)
from dynscope.fix.speculation import Speculations
from dynscope.fix.trials import RunPool, Starter, TrialRun
from dynscope.model import Capture
from dynscope.model.fix import Features, program_seconds, trial_features, trial_outputs
from dynscope.runner.program import Program

DATA = Path(__file__).resolve().parent.parent / "data" / "fix"
SCALAR = "config:torch._dynamo.config.capture_scalar_outputs=True"
MARK = "mark_dynamic:{file}:forward:x:0"
MAYBE = "maybe_mark_dynamic:{file}:forward:x:0"


def _read(name: str) -> tuple[RunFacts, list[FixProblem], Features]:
    with Capture.open(str(DATA / name)) as capture:
        view = run_view(capture)
        problems = fix_problems(view)
        facts = RunFacts(True, capture.run.exit_code, capture.run.signal, "total: 1\n",
                         metrics_of(view, program_seconds(capture)), problem_counts(problems),
                         tuple(trial_outputs(capture)))
        return facts, problems, trial_features(capture)


@pytest.fixture(scope="module")
def baseline():
    return _read("fix_model.baseline.dynscope")


@pytest.fixture(scope="module")
def scalar_trial():
    return _read("fix_model.scalar-outputs.dynscope")[0]


def _plan(baseline, tried_by_user=None):
    _, problems, features = baseline
    return plan_trials(select(problems, features), tried_by_user or {})


def _forward_file(baseline) -> str:
    return next(p.file for p in baseline[1] if p.kind == "recompile")


def test_trials_are_numbered_and_the_fallback_waits(baseline):
    plan = _plan(baseline)
    file = _forward_file(baseline)
    assert [(t.remedy.key, t.name, t.waits) for t in plan.trials] == [
        (SCALAR, "trial-1", False), ("logging:print", "trial-2", False), (MARK.format(file=file), "trial-3", False),
        (MAYBE.format(file=file), "trial-4", True),  # maybe_mark_dynamic waits for mark_dynamic on the same problem
        ("compile:dynamic=True", "trial-5", False)]
    assert [t.name for t in plan.first] == ["trial-1", "trial-2", "trial-3", "trial-5"]


def test_the_guess_is_the_best_cover_if_every_first_trial_wins(baseline):
    plan = _plan(baseline)
    # dynamic=True covers the three recompiled frames: mark_dynamic (one frame, and in conflict) stays out
    assert plan.guess == [SCALAR, "logging:print", "compile:dynamic=True"]
    # a --try setting is judged on every problem and never guessed into the combined change
    tried = _plan(baseline, {"compile:dynamic=True": "--try"})
    row = next(t for t in tried.trials if t.remedy.key == "compile:dynamic=True")
    assert row.judged_on.row.kind == "any" and len(row.judged_on.keys) == 3  # the three recompiled frames, together
    assert tried.guess == [SCALAR, "logging:print", MARK.format(file=_forward_file(baseline))]


def test_fallbacks_run_only_where_the_first_trials_did_not_fix(baseline):
    plan = _plan(baseline)
    forward = next(p.key for p in baseline[1] if p.kind == "recompile" and p.function == "forward")
    assert "trial-4" not in [t.name for t in plan.fallbacks_to_run({forward})]
    assert "trial-4" in [t.name for t in plan.fallbacks_to_run(set())]


def _judge(base: RunFacts) -> Judge:
    return Judge(base, 1e-5, 1e-5, check_stdout=True, compare_time=False)


def test_a_second_plain_run_only_when_a_trial_differs(baseline, scalar_trial):
    base = baseline[0]
    judge = _judge(base)
    assert second_baseline_reason(judge, [scalar_trial, None]) is None  # the real trial: same outputs, same stdout
    assert second_baseline_reason(judge, [scalar_trial, replace(scalar_trial, stdout="total: 2\n")]) == DIFFERS
    assert second_baseline_reason(judge, [replace(scalar_trial, exit_code=1)]) is None  # ended differently: no help


def test_the_guess_is_dead_when_a_member_loses_on_equal_outputs(baseline, scalar_trial):
    base = baseline[0]
    judge = _judge(base)
    plan = _plan(baseline)
    scalar = plan.trials[0]
    assert loses_the_guess(judge, scalar, scalar_trial) is None  # fixed: the guess may be right
    assert loses_the_guess(judge, scalar, base) == "no change"  # the break is still there: dead
    # outputs that differ may be the program's own (the second plain run judges that): not yet dead
    assert loses_the_guess(judge, scalar, replace(base, stdout="other\n")) is None
    assert loses_the_guess(judge, scalar, None) is None


def test_a_trade_off_rewrite_is_stacked_on_the_winners(baseline):
    base, problems, _ = baseline
    item = next(p for p in problems if p.kind == "graph_break" and p.line == 21)
    rewrite = Remedy("rewrite:r:m.py:21", "a rewrite", "source", ChangeSource((("/p/m.py", "x"),)), "",
                     rule="r")
    setting = Remedy("config:x", "x", "config", SetConfig("torch._dynamo.config", "x", True), "")
    plan = plan_trials([(setting, [item]), (rewrite, [item])], {})
    gone = replace(base, problems={k: n for k, n in base.problems.items() if k != item.key})
    assert stack_candidates(plan, ["config:x"], {"rewrite:r:m.py:21": "trade-off"}, {"rewrite:r:m.py:21": gone}) \
        == [rewrite]
    # not a trade-off, or its own break still there: not retried
    assert stack_candidates(plan, ["config:x"], {"rewrite:r:m.py:21": "worse"}, {"rewrite:r:m.py:21": gone}) == []
    assert stack_candidates(plan, ["config:x"], {"rewrite:r:m.py:21": "trade-off"}, {"rewrite:r:m.py:21": base}) == []


def test_source_rewrites_stand_in_for_a_setting_only_where_together_they_won_on_all_of_it(baseline):
    _, problems, _ = baseline
    breaks = [p for p in problems if p.kind == "graph_break"][:2]
    assert len(breaks) == 2
    setting = Remedy("config:x", "x", "config", SetConfig("torch._dynamo.config", "x", True), "")
    one, two = (Remedy(f"rewrite:r:m.py:{p.line}", "a rewrite", "source", ChangeSource((("/p/m.py", "x"),)), "",
                       rule="r") for p in breaks)
    plan = plan_trials([(setting, breaks), (one, breaks[:1]), (two, breaks[1:])], {})
    keys = [p.key for p in breaks]
    proven = [("config:x", "fixed", keys, None), (one.key, "improved", keys[:1], None), (two.key, "fixed", keys[1:], None)]
    assert source_alternative(plan, ["config:x"], proven) == [one.key, two.key]
    # one problem of the setting's that no rewrite won on: the setting stays
    assert source_alternative(plan, ["config:x"], [proven[0], proven[1], (two.key, "trade-off", keys[1:], None)]) \
        is None
    # nothing to replace when the chosen change holds no setting
    assert source_alternative(plan, [one.key, two.key], proven) is None
    # public before private: a rewrite that writes a private torch name never stands in for a public setting
    private = replace(two, private=("torch._higher_order_ops.print",))
    plan = plan_trials([(setting, breaks), (one, breaks[:1]), (private, breaks[1:])], {})
    assert source_alternative(plan, ["config:x"], proven) is None


def test_code_moved_to_eager_leaves_the_combined_change_where_a_kept_in_graph_winner_already_removed_its_breaks(
        baseline):
    base, problems, _ = baseline
    caller, inside = [p for p in problems if p.kind == "graph_break"][:2]
    # the NumPy helper's custom op answers the caller's break; disable-numpy-helper the helper's own
    op = Remedy("rewrite:numpy-helper-op:m.py:30", "op", "source", ChangeSource((("/p/m.py", "x"),)), "",
                rule="numpy-helper-op", fallback=True)
    eager = Remedy("rewrite:disable-numpy-helper:m.py:10", "eager", "source", ChangeSource((("/p/m.py", "y"),)), "",
                   rule="disable-numpy-helper", leaves_graph=True)
    plan = plan_trials([(op, [caller]), (eager, [inside])], {})
    both_gone = replace(base, problems={k: n for k, n in base.problems.items() if k not in (caller.key, inside.key)})
    only_caller_gone = replace(base, problems={k: n for k, n in base.problems.items() if k != caller.key})
    chosen = [op.key, eager.key]
    assert needless_in_eager(plan, chosen, {op.key: both_gone, eager.key: both_gone}) == [eager.key]
    # the op's own run still broke inside the helper: moving it to eager still does something
    assert needless_in_eager(plan, chosen, {op.key: only_caller_gone, eager.key: both_gone}) == []
    # only a remedy that keeps the code in the graph makes one that moves it needless, and only a chosen one
    assert needless_in_eager(plan, [eager.key], {op.key: both_gone, eager.key: both_gone}) == []


class _NoStarter(Starter):
    def __init__(self) -> None:
        self.stopped: list[str] = []

    def stop(self, handle):  # nothing runs here
        self.stopped.append(handle)
        return 0


def test_one_rule_for_every_speculative_run(tmp_path):
    """Claimed: used under its final name; unclaimed when settled: discarded, counted only where the
    strict sequence (--jobs 1) makes that run too (the combined guess)."""
    pool = RunPool(Program("script", "x.py"), _NoStarter(), time.time() + 30)
    spec = Speculations(pool)
    setting = [SetConfig("torch._dynamo.config", "a", True)]
    early = TrialRun("early-1", setting, str(tmp_path))
    unwanted = TrialRun("early-2", [SetConfig("torch._dynamo.config", "b", True)], str(tmp_path))
    (tmp_path / "early-1.dynscope").write_text("a run")
    (tmp_path / "early-2.dynscope").write_text("b run")
    spec.add("config:a", early)
    spec.add("config:b", unwanted)
    assert spec.claim("config:a", setting, "trial-1") is early and early.name == "trial-1"
    assert (tmp_path / "trial-1.dynscope").read_text() == "a run"
    spec.settle()
    assert not (tmp_path / "early-2.dynscope").exists() and spec.counted() == 0  # no trace of the unwanted one
    guess = TrialRun("combined", setting, str(tmp_path))
    item = spec.add("combined", guess, in_sequence=True)
    spec.give_up(item, "a was worse alone")
    assert guess.skipped == "not started: a was worse alone"
    assert spec.claim("combined", setting) is None  # given up: never claimed
    spec.settle()
    assert spec.counted() == 1  # --jobs 1 would have run it in full
    beside = TrialRun("combined-stacked", setting, str(tmp_path))
    spec.add("combined", beside)
    assert spec.claim("combined", setting) is beside  # claimed: the step that took it counts it
    spec.settle()
    assert spec.counted() == 1
