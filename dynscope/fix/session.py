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
    FixDocument,
    Measured,
    ProblemRow,
    RewriteNote,
    TrialRow,
)
from dynscope.analysis.fix_verdict import STOPPED, RunFacts, Verdict, left_at
from dynscope.analysis.fix_view import fix_problems
from dynscope.analysis.remedies import FixProblem, Remedy, select
from dynscope.errors import DynscopeError
from dynscope.events import DisableFunction, FixFamily
from dynscope.fix.baseline_check import check_baseline
from dynscope.fix.combined_step import Proven, combined_step
from dynscope.fix.early import CachedRemedies
from dynscope.fix.judging import Judge, won_on
from dynscope.fix.messages import Phase
from dynscope.fix.outdir import LOCK_NAME
from dynscope.fix.plan import Plan, Selection, Targets, leaves_graph, plan_trials
from dynscope.fix.scheduler import Budget, Scheduler
from dynscope.fix.speculation import Speculations
from dynscope.fix.trials import RunPool, TrialRun, starter_for
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


def run(options: Options, say: Callable[[str], None]) -> FixDocument:
    """The whole fix in ``options.out_dir`` (made and locked by the caller: dynscope/fix/outdir.py)."""
    starter = starter_for(options.out_dir)
    started = time.time()
    pool = RunPool(options.program, starter, started + options.budget_s)
    try:
        return _run(options, say, Scheduler(Budget(options.program, options.out_dir, options.cwd, options.profile,
                                                   options.jobs, started + options.budget_s, starter),
                                            say, pool, Speculations(pool)), started)
    finally:
        pool.close()  # an early trial still running when the baseline failed
        starter.close()


def _run(options: Options, say: Callable[[str], None], s: Scheduler, started: float) -> FixDocument:
    """Baseline, plan, trials, fallbacks, rows, the combined step, the document: the walk of one fix
    (CONTRIBUTING.md draws it)."""
    before = _fingerprint(options.program)
    # Source rewrites read the files the breaks are in: the program's tree and installed libraries
    # (with --from, the capture's directory, which the user agreed to run in before this point).
    from dynscope.fix.source_reader import reader_for
    from dynscope.rewrites.bounded import RewriteBudget

    remedies = CachedRemedies(reader_for(program_tree(options), budget=RewriteBudget(started + options.budget_s, say)))
    recorded = _recorded_problems(options.from_capture) if options.from_capture else None

    def selection_for(problems: list[FixProblem], features: Features, choose: CachedRemedies = remedies) -> Selection:
        return _selection(problems, replace(features, program_root=_root(options.program)), options, choose)

    say(Phase("baseline: running the program once as it is"))
    baseline = s.baseline(lambda partial, quick: selection_for(
        recorded if recorded is not None else partial.problems, partial.features,
        remedies.without_rewrites() if quick else remedies))
    base = _checked_baseline(baseline, options, say)
    # The trials are judged against the baseline run; with --from, a problem recorded in the
    # capture but absent from this run's baseline cannot be judged, so the baseline's keys rule.
    problems = recorded if recorded is not None else baseline.problems
    selection = selection_for(problems, baseline.features)
    say(Phase(f"baseline: {_plural(len(problems), 'problem')}, {_plural(len(selection), 'remedy', 'remedies')} to try "
        f"({baseline.wall_s or 0.0:.1f} s per run)"))
    tried_by_user = {r.key: "--patch" if r.applies_as == "source" else "--try" for r in options.patches + options.tries}
    # Times decide only where measured (--profile) and not shared: runs side by side share the cores.
    s.first_trials(plan_trials(selection, tried_by_user),
                   Judge(base, options.rtol, options.atol, options.check_stdout,
                         compare_time=options.profile and options.jobs == 1))
    judge = s.second_baseline()
    plan = s.fallbacks()
    rows, proven = _rows(plan, s, base, judge)
    combined, combined_runs = combined_step(s, proven)
    doc = FixDocument(
        command=tuple(program_argv_text(options.program)),
        cwd=options.cwd or os.getcwd(),
        torch_version=baseline.torch_version,
        out_dir=options.out_dir,
        baseline=Baseline(base.metrics, base.exit_code, baseline.capture, _round(baseline.wall_s), s.second,
                          s.eager),
        problems=tuple(ProblemRow.of(p) for p in problems),
        trials=tuple(rows),
        combined=combined,
        runs=s.runs_made() + combined_runs,
        jobs=options.jobs,
        budget_s=options.budget_s,
        wall_s=round(time.time() - started, 2),
        files_unchanged=before == _fingerprint(options.program),
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


def _checked_baseline(baseline: TrialRun, options: Options, say: Callable[[str], None]) -> RunFacts:
    """The baseline's facts; a clear error where it cannot be judged against."""
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
    return base


def _rows(plan: Plan, s: Scheduler, base: RunFacts, judge: Judge) -> tuple[list[TrialRow], Proven]:
    """One row per remedy, judged on every problem it serves together (a --try setting or a --patch:
    on every problem); and the rows' verdicts the combined change picks by."""
    rows: list[TrialRow] = []
    proven: Proven = []
    for planned in plan.trials:
        remedy, trial, t = planned.remedy, s.run_of(planned), planned.judged_on
        row, verdict = _row(t, remedy, trial, base, judge)
        rows.append(row)
        if verdict is not None and trial is not None and trial.facts is not None and planned.tried_by is None:
            # the row's own verdict: a remedy judged "moved to eager" there never wins here
            proven.append((remedy.key, verdict.verdict, won_on(verdict, base, trial.facts, t.keys), trial.facts.metrics))
    return rows, proven


def _selection(problems: list[FixProblem], features: Features, options: Options, remedies: CachedRemedies) -> Selection:
    """The remedies to try, each with the problems it serves: the table's (unless patches are
    judged: then only they and the --try settings run), then the user's --patch and --try."""
    selection = [] if options.patches else select(problems, features, options.only, choose=remedies)
    wanted = [p for p in problems if not options.only or p.family == options.only]
    for remedy in options.patches + options.tries:
        selection.append((remedy, wanted))
    return [(_with_diff(r, options.program), ts) for r, ts in selection]


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
    v = judge(facts, t.keys, leaves_graph=leaves_graph(remedy))
    if facts.timed_out:  # what a cut-short run recorded is no count to compare
        return replace(row, why=STOPPED, capture=trial.capture, wall_s=_round(trial.wall_s)), v
    count = sum(left_at(facts.problems, k) for k in t.keys)
    return replace(row, after=Measured(facts.metrics, count) if facts.metrics else None, correct=v.correct,
                   max_abs_diff=v.max_abs_diff, verdict=v.verdict, why=v.why, capture=trial.capture,
                   wall_s=_round(trial.wall_s)), v


def program_argv_text(program: Program) -> list[str]:
    from dynscope.fix.trials import program_argv

    return program_argv(program)


def _recorded_problems(path: str) -> list[FixProblem]:
    from dynscope.analysis.run_view import run_view
    from dynscope.model import Capture

    with Capture.open(path) as capture:
        return fix_problems(run_view(capture))


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
