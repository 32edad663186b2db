"""The combined run of the winners, after the trials, and the stacked retry on top of them.

Which remedies combine is the plan's (``pick_combined``, ``stack_candidates``: pure); this step
runs them, reusing a speculative run where one was started with the same actions (the combined
guess, the retry started beside the winners' run: dynscope/fix/speculation.py).
"""

from __future__ import annotations

from dataclasses import replace

from dynscope.analysis.fix_document import Combined
from dynscope.analysis.fix_problems import ProblemKey
from dynscope.analysis.fix_verdict import STOPPED, Metrics, Verdict_, pick_combined
from dynscope.fix.combine import CombinedChange, combine, combined_patch
from dynscope.fix.messages import Phase
from dynscope.fix.plan import Plan, needless_in_eager, source_alternative, stack_candidates
from dynscope.fix.scheduler import Scheduler
from dynscope.fix.trials import TrialRun, run_all

Proven = list[tuple[str, Verdict_, list[ProblemKey], Metrics | None]]


def combined_step(s: Scheduler, proven: Proven) -> tuple[Combined | None, int]:
    """The combined run of the winners, and how many runs it made beyond the trials (a speculative
    run it took counts here). A rewrite that removed its own break but was a trade-off alone (it let
    Dynamo trace on into a break a winner removes: SwitchTransformers' mask clause and its expert
    loop) gets one more run, on top of the winners; it enters only if that whole run is a win and
    has fewer breaks and recompiles than the winners' alone."""
    plan = s.plan
    facts = {t.remedy.key: run.facts for t in plan.trials for run in [s.run_of(t)] if run is not None}
    keys = pick_combined(proven, plan.conflict, plan.in_code, plan.private)
    keys = [k for k in keys if k not in needless_in_eager(plan, keys, facts)]
    if not keys:
        s.speculations.settle()
        return None, 0
    verdict_of = {key: verdict for key, verdict, _, _ in proven}
    stacked = stack_candidates(plan, keys, verdict_of, facts)
    stacked_keys = [*keys, *(r.key for r in stacked)]
    chosen = [plan.remedy(k) for k in keys]
    adds = len(combine([*chosen, *stacked]).remedies) > len(combine(chosen).remedies)
    retry = _change(plan, stacked_keys)
    # The guess, when it ran in full, may be the retry itself (the winners and the trade-off: the
    # guess that every remedy wins took them all): it keeps its run under the retry's name, before
    # the winners' run takes the name "combined".
    guess_as_retry = s.speculations.claim("combined", retry.actions, "combined-stacked") if adds else None
    # With a free slot the retry runs beside the winners' run, on the guess that they verify.
    beside = adds and s.budget.jobs > 1 and guess_as_retry is None
    combined, made = _run_combined(s, keys, "combined", beside=retry if beside else None)
    if combined.verified and combined.after is not None:
        combined, made = _prefer_source(s, keys, proven, combined, made)
    if not combined.verified or combined.after is None or not adds:  # none to add (or each changes lines a winner changed)
        if guess_as_retry is not None:
            s.speculations.release(guess_as_retry)
        s.speculations.settle()
        return combined, made
    s.say(f"combined: {_plural(len(stacked), 'rewrite')} that removed {'its' if len(stacked) == 1 else 'their'} "
          "break but grew something alone, retried on top of the winners"
          + (" (the combined guess was that run)" if guess_as_retry is not None else ""))
    ready = guess_as_retry or s.speculations.claim("combined", retry.actions, "combined-stacked")
    retried, retry_made = _run_combined(s, stacked_keys, "combined-stacked", ready=ready)
    s.speculations.settle()
    made += retry_made
    left_before = combined.after.graph_breaks + combined.after.recompiles
    if not retried.verified or retried.after is None or retried.after.graph_breaks + retried.after.recompiles >= left_before:
        return combined, made
    left_after = retried.after.graph_breaks + retried.after.recompiles
    added = len(retried.remedies) - len(combined.remedies)
    why = (f"{retried.why}; with {_plural(added, 'rewrite')} that {'was a trade-off' if added == 1 else 'were trade-offs'} "
           f"alone, on top of the winners: breaks and recompiles {left_before} → {left_after}")
    return replace(retried, why=why), made


def _prefer_source(s: Scheduler, keys: list[str], proven: Proven, combined: Combined, made: int) -> tuple[Combined, int]:
    """One more run where won source rewrites can stand in for a chosen setting (``source_alternative``): taken when
    it is verified and its whole run left no more breaks and recompiles than the combined run with the setting."""
    alternative = source_alternative(s.plan, keys, proven)
    if alternative is None:
        return combined, made
    s.say(Phase("combined: source rewrites that stand in for a setting, in one run"))
    rewritten, extra = _run_combined(s, alternative, "combined-source")
    assert combined.after is not None
    left = combined.after.graph_breaks + combined.after.recompiles
    if not rewritten.verified or rewritten.after is None or \
            rewritten.after.graph_breaks + rewritten.after.recompiles > left:
        return combined, made + extra
    return replace(rewritten, why=f"{rewritten.why}; source rewrites in place of a setting"), made + extra


def _change(plan: Plan, keys: list[str]) -> CombinedChange:
    return combine([t.remedy for t in plan.trials if t.remedy.key in keys])


def _run_combined(s: Scheduler, keys: list[str], name: str, *, ready: TrialRun | None = None,
                  beside: CombinedChange | None = None) -> tuple[Combined, int]:
    """The combined run of ``keys``, and how many runs it made (0 when a trial already was it).
    ``ready``: a speculative run claimed for it; ``beside``: a run to start at the same time where
    this one needs a new run (a speculation: the caller claims it or it is discarded)."""
    change = _change(s.plan, keys)
    kept = {r.key for r in change.remedies}
    chosen = [t for t in s.plan.trials if t.remedy.key in kept]
    remedies = [t.remedy for t in chosen]
    titles, patch = tuple(r.title for r in remedies), combined_patch(remedies, change.edits)
    trial = s.run_of(chosen[0]) if len(chosen) == 1 else ready or s.speculations.claim("combined", change.actions, name)
    made = 0 if len(chosen) == 1 else 1
    if trial is None:
        trial = _new_combined_run(s, name, change, beside, len(chosen))
    assert trial is not None  # a proven remedy was tried
    made = made if trial.skipped is None else 0
    ran = len(chosen) > 1 and trial.skipped is None
    said = Combined(titles, patch, ran, "not run", "not run", edits=change.edits, conflicts=change.conflicts,
                    settings=change.settings)
    if trial.skipped or trial.facts is None:
        return replace(said, why=trial.skipped or "not run"), made
    if trial.facts.timed_out:
        return replace(said, why=STOPPED, capture=trial.capture), made
    assert s.judge is not None
    targeted = list(dict.fromkeys(p.key for t in chosen for p in t.targets))
    v = s.judge(trial.facts, targeted)
    left = tuple(str(k) for k in trial.facts.problems)  # everything the combined run still had, targeted or not
    return replace(said, verdict=v.verdict, why=v.why, after=trial.facts.metrics, correct=v.correct,
                   max_abs_diff=v.max_abs_diff, capture=trial.capture, problems_left=left), made


def _new_combined_run(s: Scheduler, name: str, change: CombinedChange, beside: CombinedChange | None,
                      count: int) -> TrialRun:
    """A new combined run, and beside it (--jobs 2 and more) the speculative retry. Whatever the
    speculations still hold unclaimed is settled first: the run takes their names."""
    s.speculations.settle()
    if name == "combined":
        s.say(Phase(f"combined: {count} proven remedies in one run"))
    b = s.budget
    trial = b.new_run(name, change.actions)
    runs = [trial]
    if beside is not None:
        runs.append(b.new_run("combined-stacked", beside.actions))
        s.speculations.add("combined", runs[1])
    run_all(b.program, runs, jobs=len(runs), deadline=b.deadline, estimate_s=s.estimate, starter=b.starter)
    return trial


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"
