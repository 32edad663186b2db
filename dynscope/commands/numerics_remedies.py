"""``dynscope numerics --try-remedies``: one trial run per numerics remedy of the table, each with the
remedy applied through fix's trial extension (dynscope.fix.apply, the same actions ``fix`` applies) and
the numerics check on; judged by the suspect's error (dynscope/numerics/remedy_trials.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dynscope.events import NumericsChecked
    from dynscope.numerics.child import NumericsOptions
    from dynscope.numerics.remedy_trials import RemedyOutcome
    from dynscope.runner.program import Program


def _program_root(program: Program) -> str:
    return os.getcwd() if program.kind == "module" else os.path.dirname(os.path.abspath(program.target))


def _program_s(total: float | None, record: NumericsChecked | None) -> float | None:
    """The program's own time: from its start to its end, the check's own time taken out."""
    return None if total is None else max(0.0, total - (record.elapsed_s if record is not None else 0.0))


def _trial_path(path: str, entry: str) -> str:
    stem = path[: -len(".dynscope")] if path.endswith(".dynscope") else path
    return f"{stem}-remedy-{entry}.dynscope"


def try_remedies(program: Program, cwd: str | None, path: str, record: NumericsChecked, options: NumericsOptions,
                 *, from_capture: bool) -> list[RemedyOutcome]:
    from dynscope.analysis.run_view import run_view
    from dynscope.events import NumericsChecked as Checked
    from dynscope.fix.trial_payload import TrialRemedies
    from dynscope.fix.trials import program_argv
    from dynscope.model import Capture
    from dynscope.model.fix import applied_actions, program_seconds, trial_features
    from dynscope.numerics.remedy_trials import candidates, judge, numbers
    from dynscope.runner.cache_dirs import private_cache_dir
    from dynscope.runner.launcher import launch
    from dynscope.runner.spec import ChildSpec

    if record.first_suspect is None or not 0 <= record.first_suspect < len(record.nodes):
        print("dynscope numerics: no suspect: no remedy to try", file=sys.stderr)
        return []
    suspect = record.nodes[record.first_suspect]
    with Capture.open(path) as capture:
        view = run_view(capture).numerics
        problem = None if view is None else view.problem
        features = replace(trial_features(capture), program_root=_program_root(program))
        before = numbers(record, suspect, _program_s(program_seconds(capture), record))
    if problem is None:
        return []
    chosen = candidates(problem, features)
    if not chosen:
        print("dynscope numerics: no numerics remedy of the table applies to this suspect on this torch", file=sys.stderr)
    outcomes = []
    for i, candidate in enumerate(chosen, 1):
        print(f"dynscope numerics: trial {i}/{len(chosen)}: {candidate.remedy.title}", file=sys.stderr)
        trial = _trial_path(path, candidate.entry)
        command = ("dynscope", "numerics", *program_argv(program))
        with private_cache_dir("numerics") as caches:  # caches off, as the first run's (dynscope numerics)
            spec = ChildSpec(program, trial, command, workdir=cwd, cache_dir=caches,
                             extensions=(TrialRemedies((candidate.remedy.action,)).extension(), options.extension()))
            result = launch(spec, popen_kwargs={"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL}
                            if from_capture else {"stdout": subprocess.DEVNULL})
        after, applied = None, False
        if result.capture_written:
            with Capture.open(trial) as capture:
                found = capture.record_reader.records(Checked)
                trial_record = found[-1][0] if found else None
                applied = 0 in applied_actions(capture)
                after = numbers(trial_record, suspect, _program_s(program_seconds(capture), trial_record))
        outcomes.append(judge(candidate, before, after, applied=applied))
    return outcomes


def report_outcomes(outcomes: list[RemedyOutcome]) -> None:
    from dynscope.numerics.remedy_trials import RunNumbers
    from dynscope.safe_text import one_line

    def err(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3g}"

    def secs(value: float | None) -> str:
        return "?" if value is None else f"{value:.2f}s"

    def side(n: RunNumbers | None) -> tuple[str, str, str]:
        return ("no check", "?", "?") if n is None else (n.verdict or "no check", err(n.compiled_error), secs(n.program_s))

    if not outcomes:
        return
    lines = ["  remedies tried (verified: the trial's check finds no suspect):"]
    for o in outcomes:
        verdict_after, error_after, time_after = side(o.after)
        mark = "VERIFIED" if o.verified else "NOT verified"
        lines.append(f"    {mark:<12} {o.title}" + ("" if o.expectation == "expected" else " (tried though the table does "
                                                           "not expect it to help)"))
        lines.append(f"      suspect's compiled error {err(o.before.compiled_error)} -> {error_after} (eager "
                     f"{err(o.before.eager_error)}); verdict {o.before.verdict} -> {verdict_after}; program "
                     f"{secs(o.before.program_s)} -> {time_after}")
        if o.note:
            lines.append(f"      note: {o.note}")
    for line in lines:
        print(one_line(line), file=sys.stderr)
