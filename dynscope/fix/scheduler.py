"""The runs of one ``dynscope fix``, in order and side by side: the state of the run as fields.

The plan (dynscope/fix/plan.py) decides what runs; this class starts the runs, several at a time
within the budget, and keeps what they leave: the baseline and the trials it starts early, the
first trials with the combined guess beside them, the second plain run, the fallbacks. The
combined step (dynscope/fix/combined_step.py) follows; the speculative runs obey
dynscope/fix/speculation.py's one rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dynscope.analysis.fix_document import EagerWitness, SecondBaseline
from dynscope.events import Action, SetConfig
from dynscope.fix.combine import combine
from dynscope.fix.early import Partial, baseline_with_early_trials, trial_actions
from dynscope.fix.judging import Judge
from dynscope.fix.messages import Phase
from dynscope.fix.plan import (
    DIFFERS,
    Plan,
    PlannedTrial,
    Selection,
    fixed_by_first,
    loses_the_guess,
    second_baseline_reason,
)
from dynscope.fix.speculation import Speculation, Speculations
from dynscope.fix.trials import RunPool, Starter, TrialRun, run_all
from dynscope.runner.program import Program


@dataclass
class Budget:
    """Where runs go and until when they may run."""

    program: Program
    out_dir: str
    cwd: str | None
    profile: bool
    jobs: int
    deadline: float
    starter: Starter

    def new_run(self, name: str, actions: list[Action] | None = None) -> TrialRun:
        return TrialRun(name, list(actions or []), self.out_dir, self.cwd, self.profile)


@dataclass
class Scheduler:
    """One fix run's runs. ``trial_of`` maps each planned row's remedy key to its run."""

    budget: Budget
    say: Callable[[str], None]
    pool: RunPool
    speculations: Speculations
    estimate: float = 1.0  # a run's expected wall time (the baseline's)
    plan: Plan = field(default_factory=lambda: Plan(()))
    trial_of: dict[str, TrialRun] = field(default_factory=dict)
    first: list[TrialRun] = field(default_factory=list)
    later: list[TrialRun] = field(default_factory=list)  # the fallbacks that ran
    titles: dict[str, str] = field(default_factory=dict)  # run name -> what the progress line calls it
    done: int = 0  # runs ended, for the progress line "run 3/7"
    total: int = 0  # runs it will make
    judge: Judge | None = None
    guess: list[str] = field(default_factory=list)
    guess_run: Speculation | None = None
    again: TrialRun | None = None  # the second plain run, queued beside the last trials (--jobs 2+)
    queued: list[TrialRun] = field(default_factory=list)
    second: SecondBaseline | None = None
    eager_run: TrialRun | None = None  # the program with torch.compile off, made beside the second plain run
    eager: EagerWitness | None = None

    # -- the baseline ---------------------------------------------------------------------------------

    def baseline(self, selection_of: Callable[[Partial, bool], Selection]) -> TrialRun:
        """The program once as it is; with --jobs 2 and more, trials start on the free slots as soon
        as its capture shows their problems."""
        b = self.budget
        baseline = b.new_run("baseline")
        if b.jobs >= 2:
            baseline_with_early_trials(baseline, self.speculations, b.jobs, self.say, selection_of)
        else:  # --jobs 1: the strict sequence (and with --profile, times that compare)
            run_all(b.program, [baseline], jobs=1, deadline=b.deadline, estimate_s=0, starter=b.starter, pool=self.pool)
        self.estimate = baseline.wall_s or 1.0
        return baseline

    # -- the first trials, the guess beside them, the second plain run ------------------------------------

    def first_trials(self, plan: Plan, judge: Judge) -> None:
        """Every first trial (an early one claimed under its final name), the combined guess beside
        them, and the second plain run queued when a trial's outputs differ."""
        self.plan, self.judge = plan, judge
        claimed = self._claim_early(plan)
        self.titles.update({t.name: t.remedy.title for t in plan.trials if t.name is not None})
        self.guess = plan.guess
        self._start_guess_speculation()
        self.done = sum(1 for t in claimed if not self.pool.is_running(t))
        self.total = len(self.first) + (1 if self.guess_run else 0)
        for trial in claimed:
            if self.pool.is_running(trial):
                self.pool.when_done(trial, self._ended)
            else:
                self._judge_early(trial)
        guessing = [self.guess_run.run] if self.guess_run is not None and self.guess_run.run.skipped is None else []
        b = self.budget
        run_all(b.program, guessing + [t for t in self.first if t not in claimed], jobs=b.jobs, deadline=b.deadline,
                estimate_s=self.estimate, on_done=self._ended, starter=b.starter, pool=self.pool, more=self.queued)

    def _claim_early(self, plan: Plan) -> list[TrialRun]:
        """Each planned run: an early trial of the same remedy and actions where one was started,
        else a new run; the early ones no row takes are discarded."""
        claimed = []
        for t in plan.trials:
            if t.name is None:
                continue
            run = self.speculations.claim(t.remedy.key, trial_actions(t.remedy), t.name)
            if run is None:
                run = self.budget.new_run(t.name, trial_actions(t.remedy))
            else:
                claimed.append(run)
            self.trial_of[t.remedy.key] = run
            if not t.waits:
                self.first.append(run)
        self.speculations.settle()  # its problem or remedy is not in the final list: no row, not counted
        return claimed

    def _start_guess_speculation(self) -> None:
        """The combined run of the guess, started with the trials; used only if the proven set turns
        out to be that guess (else the combined run is made at the end)."""
        if len(self.guess) <= 1:
            return
        run = self.budget.new_run("combined", combine([t.remedy for t in self.plan.trials
                                                       if t.remedy.key in self.guess and t.name]).actions)
        self.titles["combined"] = f"combined guess: {len(self.guess)} remedies"
        self.guess_run = self.speculations.add("combined", run, in_sequence=True)  # --jobs 1 runs it in full

    def _finished(self, trial: TrialRun) -> None:
        self.done += 1
        ending = trial.skipped or (f"{trial.wall_s:.1f} s" if trial.wall_s is not None else "")
        said = f"run {self.done}/{self.total}: {self.titles[trial.name]} ({ending})"
        self.say(Phase(said) if not trial.skipped and trial.wall_s is not None else said)  # a stopped run: a note

    def _ended(self, trial: TrialRun) -> None:
        self._finished(trial)
        self._judge_early(trial)

    def _judge_early(self, trial: TrialRun) -> None:
        """What an ended first trial tells at once: a second plain run is needed, the guess is dead."""
        assert self.judge is not None
        if self.budget.jobs >= 2 and self.again is None and trial in self.first and self.judge.differs(trial.facts):
            self.say(DIFFERS)
            self.again = self.budget.new_run("baseline-2")
            self.titles["baseline-2"] = "the program as it is, again"
            self.total += 2
            self.queued += [self.again, self._new_eager_run()]
        guess = self.guess_run
        if guess is None or guess.run.skipped is not None or guess.run.wall_s is not None:  # ended
            return
        planned = self._planned(trial)
        if planned is None or planned.remedy.key not in self.guess:
            return
        lost = loses_the_guess(self.judge, planned, trial.facts)
        if lost is not None:
            self.speculations.give_up(guess, f"{planned.remedy.title} was {lost} alone")
            self._finished(guess.run)

    def _planned(self, run: TrialRun) -> PlannedTrial | None:
        return next((t for t in self.plan.trials if self.trial_of.get(t.remedy.key) is run), None)

    def second_baseline(self) -> Judge:
        """A second plain run, made only when a trial computed or printed something other than the
        baseline, or ran clearly slower where times are judged (--profile): remedies are then judged
        on what the two plain runs agree on, and a time as slower only past both of them by more than
        they differ. Made on demand, not beside the first trials, so a program whose trials keep its
        outputs and time pays nothing for it."""
        assert self.judge is not None
        judge, b = self.judge, self.budget
        again = self.again  # queued beside the trials when the first one differed (--jobs 2 and more)
        if again is None:
            reason = second_baseline_reason(judge, [t.facts for t in self.first])
            if reason is None:
                return judge
            self.say(reason)
            again = b.new_run("baseline-2")
            runs = [again] + ([self._new_eager_run()] if reason == DIFFERS else [])
            run_all(b.program, runs, jobs=b.jobs, deadline=b.deadline, estimate_s=self.estimate, starter=b.starter)
        if again.skipped or again.facts is None or not again.facts.ran or again.facts.timed_out:
            return judge
        self.judge, self.second = judge.with_second(again.facts, again.capture)
        if self.judge.unstable is not None or self.judge.plain_again is not None:
            self.say(self.second.message)
        self._eager_witness()
        return self.judge

    def _new_eager_run(self) -> TrialRun:
        """The program with torch.compile off, its compiled functions' outputs recorded as a trial's are:
        the witness of what the program computes without compiling."""
        self.eager_run = self.budget.new_run("eager", [SetConfig("torch._dynamo.config", "disable", True)])
        self.titles["eager"] = "the program with torch.compile off (eager)"
        return self.eager_run

    def _eager_witness(self) -> None:
        """Judged against eager from now on where the compiled baseline differs from it (said first)."""
        run = self.eager_run
        if self.judge is None or run is None or run.skipped or run.facts is None or not run.facts.ran \
                or run.facts.timed_out:
            return
        self.judge, self.eager = self.judge.with_eager(run.facts, run.capture)
        if self.eager.differs:
            self.say(self.eager.message)

    # -- the fallbacks ---------------------------------------------------------------------------------

    def fallbacks(self) -> Plan:
        """Fallbacks (maybe_mark_dynamic after mark_dynamic, an escape hatch after a specific rewrite) run
        only for problems still not fixed (``fixed_by_first``): the plan without the others."""
        assert self.judge is not None
        judge = self.judge
        fixed = fixed_by_first(self.plan, judge, {key: run.facts for key, run in self.trial_of.items()})
        self.plan = replace(self.plan, trials=self.plan.fallbacks_to_run(fixed))
        self.later = [self.trial_of[t.remedy.key] for t in self.plan.trials if t.waits and t.name is not None]
        if self.later:
            self.total += len(self.later)
            b = self.budget
            run_all(b.program, self.later, jobs=b.jobs, deadline=b.deadline, estimate_s=self.estimate,
                    on_done=self._finished, starter=b.starter)
        return self.plan

    def runs_made(self) -> int:
        """The trials and plain runs made (the combined step counts its own)."""
        return (1 + (self.second is not None) + (self.eager is not None) + sum(1 for t in self.first + self.later if t.skipped is None)
                + self.speculations.counted())

    def run_of(self, planned: PlannedTrial) -> TrialRun | None:
        return self.trial_of.get(planned.remedy.key) if planned.name is not None else None
