"""One ``dynscope fix`` run: baseline, trials, verdicts, the combined run, the document.

The document (``FixDocument``, schema ``dynscope.fix/2``, docs/fix-json.md) is what every view
of the result formats: the terminal table, ``-o`` JSON, ``--md`` Markdown, and the verified
fixes recorded into the program's capture.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dynscope import events as contract
from dynscope.analysis.fix_document import (
    Baseline,
    Combined,
    FixDocument,
    Measured,
    ProblemRow,
    RewriteNote,
    SecondBaseline,
    TrialRow,
)
from dynscope.analysis.fix_verdict import STOPPED, Metrics, RunFacts, Verdict, Verdict_, left_at, pick_combined
from dynscope.analysis.remedies import FixProblem, Remedy, problems_of, remedies_conflict, select
from dynscope.analysis.source_edits import SourceEdit, merge
from dynscope.errors import DynscopeError
from dynscope.events import Action, ChangeSource, DisableFunction, FixFamily
from dynscope.fix.baseline_check import check_baseline
from dynscope.fix.early import CachedRemedies, EarlyTrials, Partial, Selection, next_read_in, read_partial, trial_actions
from dynscope.fix.judging import Judge, won_on
from dynscope.fix.outdir import LOCK_NAME
from dynscope.fix.trials import RunPool, Starter, TrialRun, discard, rename, run_all, starter_for
from dynscope.model.fix import Features
from dynscope.runner.program import Program


@dataclass
class Options:
    program: Program
    out_dir: str
    budget_s: float
    jobs: int
    rtol: float
    atol: float
    only: FixFamily | None = None
    from_capture: str | None = None
    tries: list[Remedy] = field(default_factory=list)  # --try: settings the user wants tried too
    patches: list[Remedy] = field(default_factory=list)  # --patch: changes to judge (then nothing else is tried)
    cwd: str | None = None  # where the program runs (--from: the recorded run's directory)
    check_stdout: bool = True  # --ignore-stdout: False
    profile: bool = False  # --profile: every run measured by explain --profile


@dataclass(frozen=True)
class Targets:
    """What one trial row is judged on: the problems its remedy serves (one row per remedy), or (a
    --try setting) every problem together."""

    row: ProblemRow
    keys: tuple[str, ...]
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


Planned = tuple[Remedy, list[FixProblem], TrialRun | None]


def run(options: Options, say: Callable[[str], None]) -> FixDocument:
    """The whole fix in ``options.out_dir`` (made and locked by the caller: dynscope/fix/outdir.py)."""
    starter = starter_for(options.out_dir)
    started = time.time()
    pool = RunPool(options.program, starter, started + options.budget_s)
    try:
        return _run(options, say, starter, pool, started)
    finally:
        pool.close()  # an early trial still running when the baseline failed
        starter.close()


def _run(options: Options, say: Callable[[str], None], starter: Starter, pool: RunPool, started: float) -> FixDocument:
    deadline = started + options.budget_s
    before = _fingerprint(options.program)
    program = options.program
    # Source rewrites read the files the breaks are in: the program's tree and installed libraries
    # (with --from, the capture's directory, which the user agreed to run in before this point).
    from dynscope.fix.source_reader import reader_for

    remedies = CachedRemedies(reader_for(program_tree(options)))
    recorded = _recorded_problems(options.from_capture) if options.from_capture else None

    def selection_for(problems: list[FixProblem], features: Features, choose: CachedRemedies = remedies) -> Selection:
        return _selection(problems, replace(features, program_root=_root(program)), options, choose)

    say("baseline: running the program once as it is")
    baseline = TrialRun("baseline", [], options.out_dir, options.cwd, options.profile)
    early = EarlyTrials()
    if options.jobs >= 2:  # trials start on the free slots as soon as the baseline shows their problems
        _baseline_with_early_trials(baseline, pool, early, options.jobs, say,
                                    lambda partial, quick: selection_for(
                                        recorded if recorded is not None else partial.problems, partial.features,
                                        remedies.without_rewrites() if quick else remedies))
    else:  # --jobs 1: the strict sequence (and with --profile, times that compare)
        run_all(program, [baseline], jobs=1, deadline=deadline, estimate_s=0, starter=starter, pool=pool)
    if baseline.skipped or (baseline.facts is not None and baseline.facts.timed_out):
        raise DynscopeError(f"the first run of the program did not finish within --budget {options.budget_s:g} s "
                            f"({'stopped' if baseline.facts else 'not started'}): nothing to compare trials with; "
                            "give a larger --budget")
    if baseline.workdir_note:
        say(f"warning: the runs write into {options.cwd or os.getcwd()} itself, not into copies of it "
            f"({baseline.workdir_note})")
    if baseline.facts is None or not baseline.facts.ran:
        raise DynscopeError(f"the baseline run wrote no capture (see {os.path.join(options.out_dir, 'baseline.stderr')})")
    base = baseline.facts
    check_baseline(base.exit_code, baseline.compiled, any(p.kind == "error" for p in baseline.problems),
                   os.path.join(options.out_dir, "baseline.stderr"))
    estimate = baseline.wall_s or 1.0
    # The trials are judged against the baseline run; with --from, a problem recorded in the
    # capture but absent from this run's baseline cannot be judged, so the baseline's keys rule.
    problems = recorded if recorded is not None else baseline.problems
    selection = selection_for(problems, baseline.features)
    say(f"baseline: {_plural(len(problems), 'problem')}, {_plural(len(selection), 'remedy', 'remedies')} to try "
        f"({baseline.wall_s or 0.0:.1f} s per run)")

    runs: list[Planned] = []
    numbers = {"trial": 0, "rewrite": 0}  # a source rewrite's run is rewrite-N, the others' trial-N
    claimed: list[TrialRun] = []  # early trials the final list took (started or ended already)
    for remedy, targets in selection:
        trial = None
        stem = "rewrite" if remedy.rule else "trial"
        numbers[stem] += 1
        if remedy.tried:
            name = f"{stem}-{numbers[stem]}"
            trial = early.claim(remedy)
            if trial is None:
                trial = TrialRun(name, trial_actions(remedy), options.out_dir, options.cwd, options.profile)
            else:
                claimed.append(trial)
                if pool.is_running(trial):
                    trial.rename_to = name
                else:
                    rename(trial, name)
        runs.append((remedy, targets, trial))
    for unwanted in early.unclaimed():  # its problem or remedy is not in the final list: no row, not counted
        pool.drop(unwanted)
    # A fallback (maybe_mark_dynamic after mark_dynamic) waits for the first trials only where one
    # of them targets its problems. Source rewrites are not fallbacks: they run in the first batch
    # beside the settings tried on their break, so both a setting and a code change are proven.
    backed = {p.key for r, ts, t in runs if t is not None and not r.fallback
              and not (r.rule is None and isinstance(r.action, DisableFunction)) for p in ts}

    def waits(remedy: Remedy, targets: list[FixProblem]) -> bool:
        return remedy.fallback and any(p.key in backed for p in targets)
    first = [t for r, ts, t in runs if t is not None and not waits(r, ts)]
    titles = {trial.rename_to or trial.name: remedy.title for remedy, _, trial in runs if trial is not None}
    remedy_of = {r.key: r for r, _, _ in runs}

    def in_code(key: str) -> bool:  # on a tie the combined change takes the rewrite (docs/fix-json.md)
        return remedy_of[key].rule is not None
    tried_by_user = {r.key: "--patch" if r.applies_as == "source" else "--try" for r in options.patches + options.tries}
    # The combined run is started with the trials, on the guess that every remedy works; it is
    # used only if the proven set turns out to be that guess (else it runs again at the end).
    guess = pick_combined([(r.key, "fixed", [p.key for p in ts], None) for r, ts, t in runs
                           if t is not None and not waits(r, ts) and r.key not in tried_by_user],
                          lambda a, b: remedies_conflict(remedy_of[a], remedy_of[b]), in_code)
    speculative = None
    if len(guess) > 1:
        speculative = TrialRun("combined", combine([r for r, _, t in runs if r.key in guess and t is not None]).actions,
                               options.out_dir, options.cwd, options.profile)
        titles["combined"] = f"combined guess: {len(guess)} remedies"
    done = [sum(1 for t in claimed if not pool.is_running(t))]
    total = [len(first) + (1 if speculative else 0)]

    def finished(trial: TrialRun) -> None:
        done[0] += 1
        ending = trial.skipped or (f"{trial.wall_s:.1f} s" if trial.wall_s is not None else "")
        say(f"run {done[0]}/{total[0]}: {titles[trial.name]} ({ending})")

    # Times decide only where measured (--profile) and not shared: runs side by side share the cores.
    plain_judge = Judge(base, options.rtol, options.atol, options.check_stdout,
                        compare_time=options.profile and options.jobs == 1)
    # With --jobs 2 and more, the second plain run a differing trial calls for is queued as soon as
    # one does, to run beside the last trials instead of after them (the same run either way).
    again: list[TrialRun] = []
    queued: list[TrialRun] = []

    def second_if_differs(trial: TrialRun) -> None:
        if options.jobs >= 2 and not again and trial in first and plain_judge.differs(trial.facts):
            say(_DIFFERS)
            again.append(TrialRun("baseline-2", [], options.out_dir, options.cwd, options.profile))
            titles["baseline-2"] = "the program as it is, again"
            total[0] += 1
            queued.append(again[0])

    # The guess is dead once one of its remedies lost on outputs that agree with the baseline's (a
    # difference may yet be the program's own: the second plain run judges that): it is stopped, or
    # not started, freeing its slot. It still counts in `runs`, as --jobs 1 runs it in full.
    member_of_guess = {id(t): (r, ts) for r, ts, t in runs if t is not None and r.key in guess}
    guess_lost = [False]

    def stop_guess_if_lost(trial: TrialRun) -> None:
        if (speculative is None or speculative.skipped is not None or speculative.wall_s is not None  # ended
                or id(trial) not in member_of_guess):
            return
        if trial.facts is None or plain_judge.differs(trial.facts):
            return
        remedy, targets = member_of_guess[id(trial)]
        verdict = plain_judge(trial.facts, list(Targets.of(targets).keys), leaves_graph=_leaves_graph(remedy)).verdict
        if verdict in ("fixed", "improved") or _may_stack(remedy, targets, trial, verdict):
            return  # (a rewrite that may go on top of the winners: the guess may be that very run)
        running = pool.is_running(speculative)
        speculative.skipped = f"{'stopped' if running else 'not started'}: {remedy.title} was {verdict} alone"
        guess_lost[0] = True
        if running:
            pool.drop(speculative)
        finished(speculative)

    def ended(trial: TrialRun) -> None:
        finished(trial)
        second_if_differs(trial)
        stop_guess_if_lost(trial)

    for trial in claimed:
        if pool.is_running(trial):
            pool.when_done(trial, ended)
        else:
            second_if_differs(trial)
            stop_guess_if_lost(trial)
    guessing = [speculative] if speculative is not None and speculative.skipped is None else []
    run_all(program, guessing + [t for t in first if t not in claimed], jobs=options.jobs,
            deadline=deadline, estimate_s=estimate, on_done=ended, starter=starter, pool=pool, more=queued)
    judge, second = _second_baseline_if_needed(plain_judge, first, program, options, deadline, estimate, say, starter,
                                               again[0] if again else None)
    # Fallbacks (maybe_mark_dynamic after mark_dynamic) run only for problems still not fixed.
    fixed = {p.key for r, ts, t in runs if t in first and t is not None and t.facts is not None for p in ts
             if judge(t.facts, [p.key]).verdict == "fixed"}
    runs = [(r, ts, t) for r, ts, t in runs if not waits(r, ts) or any(p.key not in fixed for p in ts)]
    later = [t for r, ts, t in runs if t is not None and waits(r, ts)]
    if later:
        total[0] += len(later)
        run_all(program, later, jobs=options.jobs, deadline=deadline, estimate_s=estimate, on_done=finished,
                starter=starter)
    to_run = first + later

    rows: list[TrialRow] = []
    proven: list[tuple[str, Verdict_, list[str], Metrics | None]] = []
    for remedy, targets, trial in runs:
        # One row per remedy, judged on every problem it serves together (a --try setting or a
        # --patch: on every problem).
        t = Targets.every(targets, tried_by_user[remedy.key]) if remedy.key in tried_by_user else Targets.of(targets)
        row, verdict = _row(t, remedy, trial, base, judge)
        rows.append(row)
        if verdict is not None and trial is not None and trial.facts is not None and remedy.key not in tried_by_user:
            # the row's own verdict: a remedy judged "moved to eager" there never wins here
            proven.append((remedy.key, verdict.verdict, won_on(verdict, base, trial.facts, t.keys), trial.facts.metrics))

    combined, combined_runs = _combined(program, runs, proven, base, judge, options, deadline, estimate, say, starter,
                                       speculative if speculative is not None and guess else None, guess)
    after = _fingerprint(options.program)
    doc = FixDocument(
        command=tuple(program_argv_text(program)),
        cwd=options.cwd or os.getcwd(),
        torch_version=baseline.torch_version,
        out_dir=options.out_dir,
        baseline=Baseline(base.metrics, base.exit_code, baseline.capture, _round(baseline.wall_s), second),
        problems=tuple(ProblemRow.of(p) for p in problems),
        trials=tuple(rows),
        combined=combined,
        runs=1 + (second is not None) + sum(1 for t in to_run if t.skipped is None)
        + (speculative is not None and (speculative.skipped is None or guess_lost[0])) + combined_runs,
        jobs=options.jobs,
        budget_s=options.budget_s,
        wall_s=round(time.time() - started, 2),
        files_unchanged=before == after,
        stdin=os.devnull,  # every run reads nothing: a program that needs input cannot be judged
        scratch_copies=baseline.workdir is not None,  # each run in its own copy of the working directory
        stdout_checked=options.check_stdout,
        profiled=options.profile,
        rtol=options.rtol,
        atol=options.atol,
    )
    try:
        record_into_capture(options.from_capture or baseline.capture, doc)
    except (DynscopeError, OSError, sqlite3.Error) as e:
        say(f"could not record the verified fixes into {options.from_capture or baseline.capture}: {e}")
    return doc


def _selection(problems: list[FixProblem], features: Features, options: Options, remedies: CachedRemedies) -> Selection:
    """The remedies to try, each with the problems it serves: the table's (unless patches are
    judged: then only they and the --try settings run), then the user's --patch and --try."""
    selection = [] if options.patches else select(problems, features, options.only, choose=remedies)
    wanted = [p for p in problems if not options.only or p.family == options.only]
    for remedy in options.patches + options.tries:
        selection.append((remedy, wanted))
    return [(_with_diff(r, options.program), ts) for r, ts in selection]


def _baseline_with_early_trials(baseline: TrialRun, pool: RunPool, early: EarlyTrials, jobs: int,
                                say: Callable[[str], None], selection_of: Callable[[Partial, bool], Selection],
                                read: Callable[[str], Partial | None] = read_partial) -> None:
    """The baseline, and beside it, on the free job slots, the trials of the remedies its capture
    already calls for (dynscope/fix/early.py): the table's settings first (``selection_of(partial,
    True)``: no source read), then the source rewrites. Returns when the baseline has ended;
    early trials may still run."""
    if not pool.start(baseline, 0, lambda run: None):
        return
    since = time.time()
    next_read = 0.0
    while pool.is_running(baseline):
        pool.step(0.1)
        if len(pool.running) >= jobs or time.time() < next_read or not pool.is_running(baseline):
            continue
        asked = time.time()
        partial = read(baseline.capture)
        cost = time.time() - asked
        for quick in (True, False):
            if partial is None or len(pool.running) >= jobs:
                break
            for remedy in early.wanted(selection_of(partial, quick)):
                if len(pool.running) >= jobs:
                    break
                run = TrialRun(early.next_name(), trial_actions(remedy), baseline.out_dir, baseline.cwd, baseline.profile)
                # A run takes at least as long as the baseline has run so far: the budget check's estimate.
                if pool.start(run, time.time() - since, lambda run: None):
                    say(f"started early, beside the baseline: {remedy.title}")
                    early.add(remedy, run)
        next_read = time.time() + next_read_in(cost)


def _with_diff(remedy: Remedy, program: Program) -> Remedy:
    """A code change as a unified diff of the user's file, where one can be made."""
    from dynscope.fix.patches import disable_diff

    action = remedy.action
    if not isinstance(action, DisableFunction):
        return remedy
    diff = disable_diff(action.file, action.function, action.line, _root(program))
    return replace(remedy, patch=diff) if diff else remedy


def program_tree(options: Options) -> str:
    """The program's tree: its script's directory, or for ``-m`` the directory it runs in (with
    --from, the one the capture names). Source rewrites read it, diffs are relative to it,
    --apply writes only under it."""
    if options.program.kind == "module" and options.cwd:
        return options.cwd
    return _root(options.program)


def _root(program: Program) -> str:
    return os.getcwd() if program.kind == "module" else os.path.dirname(os.path.abspath(program.target))


_DIFFERS = "a trial's outputs differ: running the program plainly once more, to see what is stable"


def _second_baseline_if_needed(judge: Judge, trials: list[TrialRun], program: Program, options: Options,
                               deadline: float, estimate: float, say: Callable[[str], None],
                               starter: Starter, started: TrialRun | None = None) -> tuple[Judge, SecondBaseline | None]:
    """A second plain run, made only when a trial computed or printed something other than the
    baseline (a program that calls torch.seed() differs from itself), or ran clearly slower where
    times are judged (--profile): remedies are then judged on what the two plain runs agree on, and
    a time as slower only past both of them by more than they differ. Made on demand, not beside
    the first trials, so a program whose trials keep its outputs and time pays nothing for it."""
    if started is not None:
        again = started  # queued beside the trials when the first one differed (--jobs 2 and more)
    else:
        if any(judge.differs(t.facts) for t in trials):
            say(_DIFFERS)
        elif any(judge.slower(t.facts) for t in trials):
            say("a trial ran slower: running the program plainly once more, to see how much its time moves by itself")
        else:
            return judge, None
        again = TrialRun("baseline-2", [], options.out_dir, options.cwd, options.profile)
        run_all(program, [again], jobs=1, deadline=deadline, estimate_s=estimate, starter=starter)
    if again.skipped or again.facts is None or not again.facts.ran or again.facts.timed_out:
        return judge, None
    judge, second = judge.with_second(again.facts, again.capture)
    if judge.unstable is not None or judge.plain_again is not None:
        say(second.message)
    return judge, second


def _row(t: Targets, remedy: Remedy, trial: TrialRun | None, base: RunFacts,
         judge: Judge) -> tuple[TrialRow, Verdict | None]:
    """The remedy's row, and the trial's verdict (None: no run to judge), which the combined change picks by."""
    row = TrialRow(t.row, remedy.title, remedy.key, remedy.applies_as, remedy.patch, Measured(base.metrics, t.count),
                   "not run", "", problems=t.served, rewrite=RewriteNote.of(remedy))
    if trial is None:
        return replace(row, why="a code change: paste the patch (dynscope never edits your files)"), None
    if trial.skipped or trial.facts is None:
        return replace(row, why=trial.skipped or "not run"), None
    facts = trial.facts
    v = judge(facts, t.keys, leaves_graph=_leaves_graph(remedy))
    if facts.timed_out:  # what a cut-short run recorded is no count to compare
        return replace(row, why=STOPPED, capture=trial.capture, wall_s=_round(trial.wall_s)), v
    count = sum(left_at(facts.problems, k) for k in t.keys)
    return replace(row, after=Measured(facts.metrics, count) if facts.metrics else None, correct=v.correct,
                   max_abs_diff=v.max_abs_diff, verdict=v.verdict, why=v.why, capture=trial.capture,
                   wall_s=_round(trial.wall_s)), v


def _may_stack(remedy: Remedy, targets: list[FixProblem], trial: TrialRun | None, verdict: Verdict_ | None) -> bool:
    """A source rewrite that removed its own break but was a trade-off alone (it let Dynamo trace on
    into a break a winner removes): the combined change retries it on top of the winners."""
    return (remedy.rule is not None and verdict == "trade-off" and trial is not None and trial.facts is not None
            and all(left_at(trial.facts.problems, p.key) == 0 for p in targets))


def _leaves_graph(remedy: Remedy) -> bool:
    """The remedy runs the breaking code in eager (torch.compiler.disable) instead of making it traceable."""
    return isinstance(remedy.action, DisableFunction) or remedy.leaves_graph


@dataclass(frozen=True)
class CombinedChange:
    """The actions of a combined run: every remedy's, the source rewrites merged into one text per file."""

    remedies: list[Remedy]  # those kept (a rewrite conflicting with an earlier one is left out)
    actions: list[Action]
    edits: tuple[SourceEdit, ...]  # the merged files
    conflicts: tuple[str, ...]  # one line per rewrite left out
    settings: tuple[str, ...] = ()  # the config lines the kept rewrites need


def combine(remedies: list[Remedy]) -> CombinedChange:
    """Rewrites of one file are applied one after another on its text (``merge``); one whose
    lines an earlier one changed is left out, and said so. Other remedies keep their action."""
    rewrites = [r for r in remedies if r.edits]
    merged = merge([e for r in rewrites for e in r.edits], [r.title for r in rewrites for _ in r.edits])
    owner = [r for r in rewrites for _ in r.edits]
    dropped = {owner[i].key for i in range(len(owner)) if i not in merged.kept}
    kept = [r for r in remedies if r.key not in dropped]
    actions: list[Action] = [r.action for r in kept if not r.edits]
    # the settings the kept rewrites need, once each (a setting remedy may be there already)
    actions += [a for a in dict.fromkeys(a for r in kept if r.edits for a in r.also) if a not in actions]
    if merged.edits:
        actions.append(ChangeSource(tuple((e.file.path, e.new) for e in merged.edits)))
    settings = tuple(dict.fromkeys(f"{a.module}.{a.name} = {a.value!r}" for r in kept if r.edits for a in r.also))
    return CombinedChange(kept, actions, merged.edits, merged.conflicts, settings)


def _combined(program: Program, runs: list[Planned], proven: list[tuple[str, Verdict_, list[str], Metrics | None]],
              base: RunFacts, judge: Judge, options: Options, deadline: float, estimate: float, say: Callable[[str], None],
              starter: Starter, speculative: TrialRun | None, guess: list[str]) -> tuple[Combined | None, int]:
    """The combined run of the winners, and how many runs it made beyond the trials and the
    speculative guess (a rerun when the guess was wrong, the stacked retry)."""
    remedy_of = {r.key: r for r, _, _ in runs}

    def in_code(key: str) -> bool:
        return remedy_of[key].rule is not None
    keys = pick_combined(proven, lambda a, b: remedies_conflict(remedy_of[a], remedy_of[b]), in_code)
    if not keys:
        return None, 0
    # A rewrite that removed its own break but was a trade-off alone (it let Dynamo trace on into
    # a break a winner removes: SwitchTransformers' mask clause and its expert loop) gets one more
    # run, on top of the winners; it enters only if that whole run is a win and has fewer breaks
    # and recompiles than the winners' alone.
    verdict_of = {key: verdict for key, verdict, _, _ in proven}
    chosen = [remedy_of[k] for k in keys]
    stacked = [r for r, ts, t in runs if r.key not in keys and _may_stack(r, ts, t, verdict_of.get(r.key))
               and not any(remedies_conflict(r, other) for other in chosen)]
    stacked_keys = [*keys, *(r.key for r in stacked)]
    adds = len(combine([*chosen, *stacked]).remedies) > len(combine(chosen).remedies)
    # The guess, when it ran in full, may be the retry itself (the winners and the trade-off: the
    # guess that every remedy wins took them all): it keeps its run under the retry's name, before
    # the winners' run takes the name "combined".
    guess_is_retry = (adds and speculative is not None and speculative.skipped is None and speculative.facts is not None
                      and set(stacked_keys) == set(guess))
    if guess_is_retry:
        assert speculative is not None
        rename(speculative, "combined-stacked")
    # With a free slot the retry runs beside the winners' run, on the guess that they verify; when
    # they do not, it is removed and not counted (the document is the one --jobs 1 writes).
    beside = (TrialRun("combined-stacked", combine([r for r, _, _ in runs if r.key in stacked_keys]).actions, options.out_dir,
                       options.cwd, options.profile) if adds and options.jobs > 1 and not guess_is_retry else None)
    combined, made = _run_combined(program, runs, keys, judge, options, deadline, estimate, say, starter, speculative, guess,
                                   beside=beside)
    if beside is not None and beside.requested_at is None and beside.skipped is None:
        beside = None  # the winners' run needed no new run: the retry, if wanted, runs after it
    if not combined.verified or combined.after is None or not adds:  # none to add (or each changes lines a winner changed)
        for unused in (beside, speculative if guess_is_retry else None):
            if unused is not None:
                discard(unused)
        return combined, made
    say(f"combined: {_plural(len(stacked), 'rewrite')} that removed {'its' if len(stacked) == 1 else 'their'} "
        "break but grew something alone, retried on top of the winners"
        + (" (the combined guess was that run)" if guess_is_retry else ""))
    retried, retry_made = _run_combined(program, runs, stacked_keys, judge, options, deadline, estimate, say, starter,
                                        speculative if guess_is_retry else None, guess if guess_is_retry else [],
                                        name="combined-stacked", made_beside=beside)
    made += retry_made
    left_before = combined.after.graph_breaks + combined.after.recompiles
    if not retried.verified or retried.after is None or retried.after.graph_breaks + retried.after.recompiles >= left_before:
        return combined, made
    left_after = retried.after.graph_breaks + retried.after.recompiles
    added = len(retried.remedies) - len(combined.remedies)
    why = (f"{retried.why}; with {_plural(added, 'rewrite')} that {'was a trade-off' if added == 1 else 'were trade-offs'} "
           f"alone, on top of the winners: breaks and recompiles {left_before} → {left_after}")
    return replace(retried, why=why), made


def _run_combined(program: Program, runs: list[Planned], keys: list[str], judge: Judge, options: Options, deadline: float,
                  estimate: float, say: Callable[[str], None], starter: Starter, speculative: TrialRun | None,
                  guess: list[str], name: str = "combined", beside: TrialRun | None = None,
                  made_beside: TrialRun | None = None) -> tuple[Combined, int]:
    """The combined run of ``keys``, and how many runs it made (0 when a trial or the guess already was it).
    ``beside``: a run to make at the same time, where this one needs a new run (judged by the
    caller; left unstarted otherwise); ``made_beside``: this very run, already made beside an earlier one."""
    change = combine([r for r, _, _ in runs if r.key in keys])
    kept = {r.key for r in change.remedies}
    chosen = [(r, t, trial) for r, t, trial in runs if r.key in kept]
    remedies = [r for r, _, _ in chosen]
    titles, patch = tuple(r.title for r in remedies), combined_patch(remedies, change.edits)
    trial: TrialRun | None
    made = 0
    if len(chosen) == 1:  # the trial already is the combined run
        trial = chosen[0][2]
    elif speculative is not None and set(keys) == set(guess) and speculative.skipped is None:
        trial = speculative  # the guess was right: it already ran
    elif made_beside is not None:
        trial, made = made_beside, int(made_beside.skipped is None)
    else:
        if name == "combined":
            say(f"combined: {len(chosen)} proven remedies in one run")
        trial = TrialRun(name, change.actions, options.out_dir, options.cwd, options.profile)
        run_all(program, [trial, *([beside] if beside is not None else [])], jobs=2 if beside is not None else 1,
                deadline=deadline, estimate_s=estimate, starter=starter)
        made = int(trial.skipped is None)
    assert trial is not None  # a proven remedy was tried
    ran = len(chosen) > 1 and trial.skipped is None
    if trial.skipped or trial.facts is None:
        return Combined(titles, patch, ran, "not run", trial.skipped or "not run", edits=change.edits,
                        conflicts=change.conflicts, settings=change.settings), made
    if trial.facts.timed_out:
        return Combined(titles, patch, ran, "not run", STOPPED, capture=trial.capture, edits=change.edits,
                        conflicts=change.conflicts, settings=change.settings), made
    targeted = list(dict.fromkeys(p.key for _, ts, _ in chosen for p in ts))
    v = judge(trial.facts, targeted)
    left = tuple(trial.facts.problems)  # everything the combined run still had, targeted or not
    return Combined(titles, patch, ran, v.verdict, v.why, trial.facts.metrics, v.correct, v.max_abs_diff,
                    trial.capture, left, change.edits, change.conflicts, change.settings), made


def combined_patch(remedies: list[Remedy], edits: tuple[SourceEdit, ...] = ()) -> str:
    """Config lines once each (imports first), then the code changes (source rewrites as one
    diff per file, ``edits``: merged)."""
    imports: list[str] = []
    lines: list[str] = []
    others: list[str] = []
    for r in remedies:
        if r.edits:
            if r.also:
                imports.append("import torch")
                lines.extend(f"{a.module}.{a.name} = {a.value!r}" for a in r.also)
            continue
        if r.applies_as == "config":
            for line in r.patch.splitlines():
                (imports if line.startswith("import ") else lines).append(line)
        else:
            others.append(r.patch.rstrip("\n"))
    others.extend(e.diff().rstrip("\n") for e in edits)
    head = list(dict.fromkeys(imports)) + list(dict.fromkeys(lines))
    return "\n".join(head + ([""] if head and others else []) + others) + "\n"


def program_argv_text(program: Program) -> list[str]:
    from dynscope.fix.trials import program_argv

    return program_argv(program)


def _recorded_problems(path: str) -> list[FixProblem]:
    from dynscope.analysis.run_view import run_view
    from dynscope.model import Capture

    with Capture.open(path) as capture:
        return problems_of(run_view(capture))


def record_into_capture(path: str, doc: FixDocument) -> None:
    """The proven fixes, one event per problem, so every view of that capture shows them."""
    from dynscope.model import Capture
    from dynscope.store.writer import CaptureWriter

    with Capture.open(path) as capture:  # fix run twice on one capture: each fix recorded once
        known = {(f.kind, f.file, f.line, f.function, f.remedy) for f in capture.fix_results()}
    proven = [(row, p) for row in doc.trials if row.verdict in ("fixed", "improved") and row.problem.kind != "any"
              for p in row.served if (p.kind, p.file, p.line, p.function, row.remedy) not in known]
    if not proven:
        return
    writer = CaptureWriter.reopen(path)
    try:
        for row, p in proven:
            contract.write(writer, contract.FixResult(
                problem=contract.FixProblemRef(kind=p.kind, file=p.file, line=p.line, function=p.function,
                                               detail=p.detail, count=p.count),
                remedy=row.remedy, remedy_key=row.remedy_key, applies_as=row.applies_as, patch=row.patch,
                verdict=row.verdict, before=row.before.to_json(), after=row.after.to_json() if row.after else {},
                max_abs_diff=row.max_abs_diff))
    finally:
        writer.close()


def _fingerprint(program: Program) -> dict[str, str]:
    """Hashes of the program's Python files (its script's directory), to prove none was edited."""
    root = _root(program)
    found: dict[str, str] = {}
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__" and not d.endswith("-fix")
                   and not os.path.lexists(os.path.join(directory, d, LOCK_NAME))]  # fix output directories
        for name in files:
            if name.endswith(".py") and len(found) < 5000:
                path = os.path.join(directory, name)
                try:
                    with open(path, "rb") as f:
                        found[path] = hashlib.blake2b(f.read(), digest_size=16).hexdigest()
                except OSError:
                    pass
    return found


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"
