"""dynscope fix's trials started while the baseline runs (dynscope/fix/early.py), without torch:
what a partly written baseline capture yields, which early trial the final list takes over,
the scheduling beside the baseline (a stand-in starter), and how a forked run ends."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from dynscope.analysis.fix_view import fix_problems
from dynscope.analysis.remedies import Remedy, select
from dynscope.analysis.run_view import run_view
from dynscope.events import SetConfig, ShowOnly
from dynscope.fix import early as early_module
from dynscope.fix.early import CachedRemedies, Partial, baseline_with_early_trials, read_partial, trial_actions, wanted_early
from dynscope.fix.speculation import Speculations
from dynscope.fix.trials import RunPool, Starter, TrialRun, rename
from dynscope.model import Capture
from dynscope.model.fix import trial_features
from dynscope.runner.program import Program
from dynscope.runner.quick_exit import exit_status, leave

DATA = Path(__file__).resolve().parent.parent / "data" / "fix"


def _setting(name: str, value: object = True, *, fallback: bool = False, key: str | None = None) -> Remedy:
    action = SetConfig("torch._dynamo.config", name, value)  # type: ignore[arg-type]
    return Remedy(key or f"config:{name}", f"{name} = {value}", "config", action, "", fallback=fallback)


def _partial_copy(tmp_path: Path, keep_events: int) -> Path:
    """The recorded baseline of tests/programs/fix_model.py as it stood after its first
    ``keep_events`` events: what fix reads while the run is still writing."""
    path = tmp_path / "partial.dynscope"
    shutil.copy(DATA / "fix_model.baseline.dynscope", path)
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM events WHERE id > (SELECT MIN(id) FROM events) + ?", (keep_events - 1,))
    return path


def _whole() -> tuple[list, object]:
    with Capture.open(str(DATA / "fix_model.baseline.dynscope")) as capture:
        return fix_problems(run_view(capture)), trial_features(capture)


def test_a_partly_written_baseline_names_problems_with_their_final_keys(tmp_path):
    problems, features = _whole()
    with sqlite3.connect(DATA / "fix_model.baseline.dynscope") as db:
        total = db.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    final_keys = {p.key for p in problems}
    seen_some = False
    for share in (0.2, 0.4, 0.6, 0.8):
        partial = read_partial(str(_partial_copy(tmp_path, int(total * share))))
        assert partial is not None
        keys = [p.key for p in partial.problems]
        assert set(keys) <= final_keys, share  # a key read early is the key of the whole run
        seen_some = seen_some or bool(keys)
        assert partial.features.functions == features.functions  # recorded first thing in the run
    assert seen_some
    assert read_partial(str(tmp_path / "not-yet.dynscope")) is None  # the child has not opened it yet


def test_what_starts_early_is_what_the_final_selection_runs(tmp_path):
    """Every remedy an early read of the real baseline starts is claimed by the selection of the
    whole run with the same actions (none would be thrown away here)."""
    problems, features = _whole()
    final = select(problems, features)
    with sqlite3.connect(DATA / "fix_model.baseline.dynscope") as db:
        total = db.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    partial = read_partial(str(_partial_copy(tmp_path, int(total * 0.6))))
    assert partial is not None and partial.problems
    early = _speculations(tmp_path)
    started = wanted_early(select(partial.problems, partial.features), early.started_for())
    assert started
    for remedy in started:
        early.add(remedy.key, TrialRun(early.next_early_name(), trial_actions(remedy), str(tmp_path)))
    claimed = [r for r, _ in final if early.claim(r.key, trial_actions(r)) is not None]
    assert {r.key for r in claimed} == {r.key for r in started}
    early.settle()
    assert early.settled == [] and early.counted() == 0


def test_an_early_trial_is_taken_only_for_the_same_remedy_and_actions(tmp_path):
    early = _speculations(tmp_path)

    def claim(remedy):
        return early.claim(remedy.key, trial_actions(remedy))
    same, other_value = _setting("capture_scalar_outputs"), _setting("capture_scalar_outputs", False,
                                                                     key="config:capture_scalar_outputs")
    run = TrialRun(early.next_early_name(), trial_actions(same), str(tmp_path))
    early.add(same.key, run)
    assert claim(other_value) is None  # same key, other actions: not the run it asks for
    assert claim(_setting("specialize_int")) is None
    assert claim(same) is run and claim(same) is None  # taken once
    skipped = TrialRun(early.next_early_name(), trial_actions(same), str(tmp_path), skipped="the budget ran out")
    early.add(same.key, skipped)
    assert claim(same) is None  # never ran: a fresh trial instead
    early.settle()
    assert [s.run for s in early.settled] == [skipped] and [s.run for s in early.items] == [run]
    assert early.counted() == 0  # neither counts beyond the trial that claimed one
    assert [early.next_early_name() for _ in range(2)] == ["early-3", "early-4"]


def test_only_tried_remedies_that_are_not_fallbacks_start_early(tmp_path):
    shown = Remedy("show:check", "torch._check", "code", ShowOnly("torch._check(x)"), "")
    wanted = [_setting("a"), _setting("b", fallback=True), shown, _setting("c")]
    picked = wanted_early([(r, []) for r in wanted], set())
    assert [r.key for r in picked] == ["config:a", "config:c"]
    assert [r.key for r in wanted_early([(r, []) for r in wanted], {"config:a"})] == ["config:c"]  # started once


def test_remedies_are_remembered_per_problem_whatever_its_count(monkeypatch):
    problems, features = _whole()
    calls = []
    real = early_module.remedies_for

    def counted(problem, features, read=None):
        calls.append(problem.key)
        return real(problem, features, read)

    monkeypatch.setattr(early_module, "remedies_for", counted)
    remedies = CachedRemedies(None)
    first = select(problems, features, choose=remedies)
    from dataclasses import replace

    again = select([replace(p, count=p.count + 5) for p in problems], features, choose=remedies)
    assert len(calls) == len(problems)  # the second selection computed nothing
    assert [(r.key, [p.key for p in ps]) for r, ps in first] == [(r.key, [p.key for p in ps]) for r, ps in again]
    assert [(r, [p.key for p in ps]) for r, ps in first] == [(r, [p.key for p in ps]) for r, ps in select(problems, features)]


def _speculations(tmp_path: Path) -> Speculations:
    """Speculations over a pool that runs nothing (the runs here are made by hand)."""
    return Speculations(RunPool(Program("script", "x.py"), FakeStarter({}), time.time() + 30))


def _program_dir(tmp_path: Path) -> str:
    """Where the stand-in program runs (each run gets a scratch copy of it)."""
    path = tmp_path / "program"
    path.mkdir(exist_ok=True)
    return str(path)


class FakeStarter(Starter):
    """Runs that end ``seconds[name]`` after they start and write nothing (no torch, no process)."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds, self.started, self.stopped, self.most, self.live = seconds, [], [], 0, set()

    def start(self, program, run, deadline):
        self.started.append((run.name, time.time()))
        self.live.add(run.name)
        self.most = max(self.most, len(self.live))
        return run.name, time.time() + self.seconds.get(run.name, 0.2)

    def poll(self, handle):
        name, end = handle
        if time.time() < end:
            return None
        self.live.discard(name)
        return 0

    def stop(self, handle):
        self.stopped.append(handle[0])
        self.live.discard(handle[0])
        return -9

    def finish(self, run, returncode, wall_s):
        pass


def test_trials_start_beside_the_baseline_as_its_problems_appear(tmp_path):
    """The baseline's capture names nothing for 0.4 s, then one problem with two remedies: with
    --jobs 2 one starts on the free slot, the other waits (no slot); reading stops when the
    baseline ends, and the early trial may still be running then."""
    starter = FakeStarter({"baseline": 1.0, "early-1": 1.5})
    pool = RunPool(Program("script", "x.py"), starter, time.time() + 30)
    baseline = TrialRun("baseline", [], str(tmp_path), cwd=_program_dir(tmp_path))
    began = time.time()
    reads = []

    def read(path):
        reads.append(time.time() - began)
        return Partial([], object()) if time.time() - began < 0.4 else Partial(["p"], object())  # type: ignore[arg-type, list-item]

    def selection_of(partial, quick):
        return [(_setting("a"), partial.problems), (_setting("b"), partial.problems)] if partial.problems else []

    early = Speculations(pool)
    said = []
    try:
        baseline_with_early_trials(baseline, early, 2, said.append, selection_of, read)
        assert not pool.is_running(baseline) and baseline.wall_s is not None
        names = [name for name, _ in starter.started]
        assert names == ["baseline", "early-1"] and starter.most == 2
        early_at = dict(starter.started)["early-1"] - dict(starter.started)["baseline"]
        assert 0.4 <= early_at < 1.0  # after the problem appeared, before the baseline ended
        assert [t.purpose for t in early.items] == ["config:a"]
        assert pool.is_running(early.items[0].run)  # still running: the final selection decides
        assert said == ["started early, beside the baseline: a = True"]
        assert max(reads) < 1.0 + 0.2  # no read after the baseline ended
    finally:
        pool.close()
    assert starter.stopped == ["early-1"]  # close() leaves no run behind


def test_jobs_one_slot_busy_reads_nothing(tmp_path):
    """With every slot taken (--jobs 2, an early trial running) the capture is not read again."""
    starter = FakeStarter({"baseline": 0.8, "early-1": 5.0})
    pool = RunPool(Program("script", "x.py"), starter, time.time() + 30)
    baseline = TrialRun("baseline", [], str(tmp_path), cwd=_program_dir(tmp_path))
    reads = []

    def read(path):
        reads.append(path)
        return Partial(["p"], object())  # type: ignore[arg-type, list-item]

    try:
        baseline_with_early_trials(baseline, Speculations(pool), 2, lambda line: None,
                                   lambda partial, quick: [(_setting("a"), [])], read)
    finally:
        pool.close()
    assert len(reads) == 1


def test_an_early_trial_past_the_deadline_is_stopped(tmp_path):
    starter = FakeStarter({"baseline": 0.3, "early-1": 10.0})
    pool = RunPool(Program("script", "x.py"), starter, time.time() + 1.0)
    baseline = TrialRun("baseline", [], str(tmp_path), cwd=_program_dir(tmp_path))
    early = Speculations(pool)
    baseline_with_early_trials(baseline, early, 2, lambda line: None,
                               lambda partial, quick: [(_setting("a"), [])], lambda path: Partial([], object()))  # type: ignore[arg-type]
    run = early.items[0].run
    while pool.running:
        pool.step()
    assert run.facts is not None and run.facts.timed_out and starter.stopped == ["early-1"]


def test_a_claimed_run_gets_its_final_name_and_a_dropped_one_leaves_nothing(tmp_path):
    starter = FakeStarter({"early-1": 0.3, "early-2": 5.0})
    pool = RunPool(Program("script", "x.py"), starter, time.time() + 30)
    kept = TrialRun("early-1", [], str(tmp_path), cwd=_program_dir(tmp_path))
    dropped = TrialRun("early-2", [], str(tmp_path), cwd=_program_dir(tmp_path))
    (tmp_path / "trial-1.dynscope").write_text("left by an earlier fix run in this --out")
    for run in (kept, dropped):
        assert pool.start(run, 0, lambda r: None)
        for suffix in (".dynscope", ".stdout", ".stderr"):
            (tmp_path / f"{run.name}{suffix}").write_text(run.name)
    kept.rename_to = "trial-1"
    pool.drop(dropped)
    assert starter.stopped == ["early-2"] and not list(tmp_path.glob("early-2*"))
    while pool.running:
        pool.step()
    assert kept.name == "trial-1" and kept.capture == str(tmp_path / "trial-1.dynscope")
    assert (tmp_path / "trial-1.dynscope").read_text() == "early-1" and not list(tmp_path.glob("early-*"))
    ended = TrialRun("early-3", [], str(tmp_path))
    (tmp_path / "early-3.stdout").write_text("out")
    rename(ended, "rewrite-2")
    assert ended.name == "rewrite-2" and (tmp_path / "rewrite-2.stdout").read_text() == "out"


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (3, 3), (True, 1), (-1, 255), (256, 0), ("bye", 1)])
def test_a_forked_run_exits_with_pythons_status(code, status, capsys):
    assert exit_status(code) == status


def test_a_forked_run_ends_as_python_would_minus_its_teardown(tmp_path):
    """Files the program left open keep what it wrote, atexit functions run, the status is
    sys.exit's: what the program can see of its own end."""
    pid = os.fork()
    if pid == 0:
        try:
            import atexit

            atexit._clear()  # not the test runner's own (a coverage plugin's would save its data here)
            unclosed = open(tmp_path / "unclosed.txt", "w")  # noqa: SIM115  never closed, on purpose
            unclosed.write("written, never flushed")
            atexit.register(lambda: (tmp_path / "atexit.txt").write_text("ran"))
            leave(SystemExit(7))
        finally:
            os._exit(99)  # leave() returned or raised: the test fails on the status
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7
    assert (tmp_path / "unclosed.txt").read_text() == "written, never flushed"
    assert (tmp_path / "atexit.txt").read_text() == "ran"


def test_a_run_asked_for_on_the_way_joins_the_queue(tmp_path):
    """run_all's ``more``: the second plain run a differing trial calls for, queued while the
    trials still run, runs on the next free slot and is waited for like them."""
    from dynscope.fix.trials import run_all

    starter = FakeStarter({"trial-1": 0.2, "trial-2": 0.8, "baseline-2": 0.2})
    cwd = _program_dir(tmp_path)
    runs = [TrialRun(name, [], str(tmp_path), cwd=cwd) for name in ("trial-1", "trial-2")]
    queued: list[TrialRun] = []
    done: list[str] = []

    def on_done(run):
        done.append(run.name)
        if run.name == "trial-1":
            queued.append(TrialRun("baseline-2", [], str(tmp_path), cwd=cwd))

    run_all(Program("script", "x.py"), runs, jobs=2, deadline=time.time() + 30, estimate_s=0.1, on_done=on_done,
            starter=starter, more=queued)
    assert done == ["trial-1", "baseline-2", "trial-2"]  # beside trial-2, not after it
    assert starter.most == 2 and not queued


def test_the_scheduler_stops_the_guess_once_a_member_loses_and_still_counts_it(tmp_path):
    """Two settings, each for its own problem: the combined guess starts with the first trial (--jobs
    2); the trial ends having recorded nothing (a stand-in run: "failed"), so the guess is stopped at
    once, its slot going to the second trial, and counted as --jobs 1 would have run it in full."""
    from dynscope.analysis.fix_problems import BreakFacts, FixProblem, ProblemKey
    from dynscope.analysis.fix_verdict import Metrics, RunFacts
    from dynscope.fix.judging import Judge
    from dynscope.fix.plan import plan_trials
    from dynscope.fix.scheduler import Budget, Scheduler

    def problem(line):
        key = ProblemKey("break", "cause", "/p/m.py", line)
        return FixProblem("graph_break", key, "/p/m.py", line, "f", "a break", 1, BreakFacts("", "", (), ""))
    p, q = problem(1), problem(2)
    starter = FakeStarter({"combined": 5.0, "trial-1": 0.2, "trial-2": 0.2})
    pool = RunPool(Program("script", "x.py"), starter, time.time() + 30)
    said: list[str] = []
    s = Scheduler(Budget(Program("script", "x.py"), str(tmp_path), _program_dir(tmp_path), False, 2, time.time() + 30,
                         starter), said.append, pool, Speculations(pool))
    base = RunFacts(True, 0, None, "", Metrics(2, 0, 0, 1.0, None), {p.key: 1, q.key: 1}, ())
    try:
        s.first_trials(plan_trials([(_setting("a"), [p]), (_setting("b"), [q])], {}), Judge(base, 0, 0, True, False))
    finally:
        pool.close()
    assert s.guess == ["config:a", "config:b"] and s.guess_run is not None
    assert s.guess_run.run.skipped == "stopped: a = True was failed alone" and starter.stopped == ["combined"]
    assert [name for name, _ in starter.started] == ["combined", "trial-1", "trial-2"] and starter.most == 2
    assert said[1] == "run 2/3: combined guess: 2 remedies (stopped: a = True was failed alone)", said
    assert s.speculations.counted() == 1 and s.runs_made() == 4  # baseline, two trials, the stopped guess
    assert not list(tmp_path.glob("combined*"))  # stopped: its files removed
