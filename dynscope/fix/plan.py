"""What one ``dynscope fix`` runs, as a function of recorded facts (no process started, no torch).

The scheduler (dynscope/fix/scheduler.py) asks this module every question whose answer decides a
run: which trials run first and which wait as fallbacks (``plan_trials``), what the combined
guess is (``Plan.guess``), when a second plain run is needed (``second_baseline_reason``), when
the guess is dead (``loses_the_guess``), which fallbacks still run (``fixed_by_first``, ``Plan.fallbacks_to_run``)
which trade-offs are retried on top of the winners (``stack_candidates``) and which source rewrites may stand in
for a chosen setting (``source_alternative``). Each answer is a
function of the selection and of the runs' recorded facts, so tests/unit/test_fix_plan.py checks
them from recorded captures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dynscope.analysis.fix_document import ProblemRow
from dynscope.analysis.fix_problems import ProblemKey
from dynscope.analysis.fix_verdict import RunFacts, Verdict_, left_at, pick_combined
from dynscope.analysis.remedies import FixProblem, Remedy, remedies_conflict
from dynscope.events import DisableFunction
from dynscope.fix.judging import Judge

Selection = list[tuple[Remedy, list[FixProblem]]]


@dataclass(frozen=True)
class Targets:
    """What one trial row is judged on: the problems its remedy serves (one row per remedy), or (a
    --try setting) every problem together."""

    row: ProblemRow
    keys: tuple[ProblemKey, ...]
    count: int
    served: tuple[ProblemRow, ...] = ()

    @classmethod
    def of(cls, problems: list[FixProblem]) -> Targets:
        return cls(ProblemRow.of(problems[0]), tuple(p.key for p in problems), sum(p.count for p in problems),
                   tuple(ProblemRow.of(p) for p in problems))

    @classmethod
    def every(cls, problems: list[FixProblem], option: str) -> Targets:
        return cls(ProblemRow("any", None, None, None, f"every problem ({option})", sum(p.count for p in problems)),
                   tuple(p.key for p in problems), sum(p.count for p in problems),
                   tuple(ProblemRow.of(p) for p in problems))


@dataclass(frozen=True)
class PlannedTrial:
    """One row of the document: a remedy, the problems it is tried for, and its run's name (None: a
    code change dynscope cannot apply, shown and not run)."""

    remedy: Remedy
    targets: list[FixProblem]
    name: str | None
    waits: bool  # a fallback: runs only if the first trials leave one of its problems unfixed
    tried_by: str | None  # "--try" or "--patch": the user's, judged on every problem together

    @property
    def judged_on(self) -> Targets:
        return Targets.every(self.targets, self.tried_by) if self.tried_by else Targets.of(self.targets)


@dataclass(frozen=True)
class Plan:
    trials: tuple[PlannedTrial, ...]

    @property
    def first(self) -> list[PlannedTrial]:
        """The trials that run at once (beside the baseline's early ones)."""
        return [t for t in self.trials if t.name is not None and not t.waits]

    def remedy(self, key: str) -> Remedy:
        return next(t.remedy for t in self.trials if t.remedy.key == key)

    def in_code(self, key: str) -> bool:
        """On a tie the combined change takes the rewrite (docs/fix-json.md)."""
        return self.remedy(key).rule is not None

    def private(self, key: str) -> bool:
        """Among remedies that pass, the change to make prefers torch's public API and settings."""
        return bool(self.remedy(key).private)

    def conflict(self, a: str, b: str) -> bool:
        return remedies_conflict(self.remedy(a), self.remedy(b))

    @property
    def guess(self) -> list[str]:
        """The combined run started with the trials, on the guess that every first trial wins (the
        user's --try and --patch aside); used only if the proven set turns out to be that guess."""
        return pick_combined([(t.remedy.key, "fixed", [p.key for p in t.targets], None) for t in self.first
                              if t.tried_by is None], self.conflict, self.in_code, self.private)

    def fallbacks_to_run(self, fixed: set[ProblemKey]) -> tuple[PlannedTrial, ...]:
        """The rows kept once the first trials are judged (``fixed``: the problem keys some first
        trial fixed): a fallback only while one of its problems is still not fixed."""
        return tuple(t for t in self.trials if not t.waits or any(p.key not in fixed for p in t.targets))


def fixed_by_first(plan: Plan, judge: Judge, facts: Mapping[str, RunFacts | None]) -> set[ProblemKey]:
    """The problems some first trial fixed (``facts``: each remedy's run), so that the fallbacks for
    them do not run. A break only moved to eager (disable-numpy-helper) is not fixed: an escape hatch
    that keeps the code in the graph is still worth its run."""
    return {p.key for t in plan.trials if not t.waits and t.name is not None
            for run in [facts.get(t.remedy.key)] if run is not None
            for p in t.targets if judge(run, [p.key], leaves_graph=leaves_graph(t.remedy)).verdict == "fixed"}


def plan_trials(selection: Selection, tried_by_user: dict[str, str]) -> Plan:
    """One row per remedy in selection order; a source rewrite's run is rewrite-N, the others'
    trial-N. A fallback (maybe_mark_dynamic after mark_dynamic) waits for the first trials only where
    one of them targets its problems. Source rewrites are not fallbacks: they run in the first batch
    beside the settings tried on their break, so both a setting and a code change are proven."""
    numbers = {"trial": 0, "rewrite": 0}
    names: list[str | None] = []
    for remedy, _ in selection:
        stem = "rewrite" if remedy.rule else "trial"
        numbers[stem] += 1
        names.append(f"{stem}-{numbers[stem]}" if remedy.tried else None)
    backed = {p.key for (r, ts), name in zip(selection, names, strict=True) if name is not None and not r.fallback
              and not (r.rule is None and isinstance(r.action, DisableFunction)) for p in ts}
    return Plan(tuple(PlannedTrial(r, ts, name, r.fallback and any(p.key in backed for p in ts),
                                   tried_by_user.get(r.key))
                      for (r, ts), name in zip(selection, names, strict=True)))


def second_baseline_reason(judge: Judge, trials: Sequence[RunFacts | None]) -> str | None:
    """Why the program is run plainly once more (None: not needed): a trial computed or printed
    something other than the baseline (a program that calls torch.seed() differs from itself), or
    ran clearly slower where times are judged (--profile)."""
    if any(judge.differs(t) for t in trials):
        return DIFFERS
    if any(judge.slower(t) for t in trials):
        return "a trial ran slower: running the program plainly once more, to see how much its time moves by itself"
    return None


DIFFERS = "a trial's outputs differ: running the program plainly once more, to see what is stable"


def loses_the_guess(judge: Judge, trial: PlannedTrial, facts: RunFacts | None) -> Verdict_ | None:
    """The verdict that makes the combined guess dead (None: the guess may still be right): one of
    its remedies lost on outputs that agree with the baseline's (a difference may yet be the
    program's own: the second plain run judges that), and is no rewrite that may be stacked."""
    if facts is None or judge.differs(facts):
        return None
    verdict = judge(facts, list(Targets.of(trial.targets).keys), leaves_graph=leaves_graph(trial.remedy)).verdict
    if verdict in ("fixed", "improved") or may_stack(trial, facts, verdict):
        return None  # (a rewrite that may go on top of the winners: the guess may be that very run)
    return verdict


def may_stack(trial: PlannedTrial, facts: RunFacts | None, verdict: Verdict_ | None) -> bool:
    """A source rewrite that removed its own break but was a trade-off alone (it let Dynamo trace on
    into a break a winner removes): the combined change retries it on top of the winners."""
    return (trial.remedy.rule is not None and verdict == "trade-off" and facts is not None
            and all(left_at(facts.problems, p.key) == 0 for p in trial.targets))


def stack_candidates(plan: Plan, winners: list[str], verdicts: dict[str, Verdict_],
                     facts: dict[str, RunFacts | None]) -> list[Remedy]:
    """The trade-off rewrites to retry on top of the winners (SwitchTransformers' mask clause and its
    expert loop): not winners, removed their own break, conflict with no winner."""
    chosen = [plan.remedy(k) for k in winners]
    return [t.remedy for t in plan.trials if t.remedy.key not in winners
            and may_stack(t, facts.get(t.remedy.key), verdicts.get(t.remedy.key))
            and not any(remedies_conflict(t.remedy, other) for other in chosen)]


def needless_in_eager(plan: Plan, chosen: list[str], facts: Mapping[str, RunFacts | None]) -> list[str]:
    """The chosen remedies that move code to eager (``torch.compiler.disable``, disable-numpy-helper) whose every
    problem another chosen remedy's own run already left at zero while keeping the code in the graph (the custom op
    around the same NumPy helper): the combined change leaves them out, so the printed diff has no decorator that
    does nothing."""
    keeping = [k for k in chosen if not leaves_graph(plan.remedy(k)) and facts.get(k) is not None]
    needless = []
    for key in chosen:
        trial = next(t for t in plan.trials if t.remedy.key == key)
        if not leaves_graph(trial.remedy):
            continue
        if any(all(left_at(run.problems, p.key) == 0 for p in trial.targets)
               for other in keeping for run in [facts[other]] if run is not None):
            needless.append(key)
    return needless


def source_alternative(plan: Plan, chosen: list[str],
                       proven: Sequence[tuple[str, Verdict_, Sequence[ProblemKey], object]]) -> list[str] | None:
    """The chosen remedies with each setting among them replaced by won source rewrites that, together, won on
    every problem the setting won on (Flaubert: ``capture_scalar_outputs`` for two asserts on ``.item()``, each
    rewritten alone). A setting changes how every compiled function traces; a rewrite changes the line that broke,
    and the written diff alone reproduces it. Public before private still holds. None when no setting can be
    replaced so."""
    won: dict[str, set[ProblemKey]] = {}
    for key, verdict, targets, _ in proven:
        if verdict in ("fixed", "improved"):
            won.setdefault(key, set()).update(targets)
    out, replaced = list(chosen), False
    for key in chosen:
        if plan.in_code(key) or key not in won:
            continue
        need, picked = set(won[key]), []
        # never a private torch name in place of a public setting (the print operator for reorderable_logging_functions)
        substitutes = (k for k in won if plan.in_code(k) and k not in out and plan.private(k) <= plan.private(key))
        for other in substitutes:
            if need & won[other] and not any(plan.conflict(other, o) for o in out if o != key):
                picked.append(other)
                need -= won[other]
        if not need:
            out = [k for k in out if k != key] + picked
            replaced = True
    return out if replaced else None


def leaves_graph(remedy: Remedy) -> bool:
    """The remedy runs the breaking code in eager (torch.compiler.disable) instead of making it traceable."""
    return isinstance(remedy.action, DisableFunction) or remedy.leaves_graph
