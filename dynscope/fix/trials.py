"""Run ``dynscope explain`` on the program once per remedy set, several at a time, within a budget.

Each run is a fresh process (caches off, as ``explain``) with ``DYNSCOPE_FIX`` naming the
remedies its child applies (dynscope/fix/apply.py). This process never imports torch: it reads
each run's capture through the model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from dynscope.analysis.fix_verdict import RunFacts, metrics_from_summary
from dynscope.analysis.remedies import problem_counts
from dynscope.model.fix import ENV, applied_actions, trial_features, trial_outputs
from dynscope.runner.program import Program


@dataclass
class TrialRun:
    name: str  # file stem in the output directory: baseline, trial-3, combined
    actions: list[dict[str, Any]]
    out_dir: str
    facts: RunFacts | None = None
    summary: dict[str, Any] | None = None
    features: dict[str, Any] = field(default_factory=dict)
    wall_s: float | None = None
    skipped: str | None = None  # why it was not run (the budget)

    @property
    def capture(self) -> str:
        return os.path.join(self.out_dir, f"{self.name}.dynscope")


def program_argv(program: Program) -> list[str]:
    return (["-m", program.target] if program.kind == "module" else [program.target]) + list(program.args)


def run_all(program: Program, runs: list[TrialRun], *, jobs: int, deadline: float, estimate_s: float,
            on_done: Callable[[TrialRun], None] = lambda run: None) -> None:
    """Run them ``jobs`` at a time. One that cannot finish before ``deadline`` (judged by
    ``estimate_s``, a run's expected wall time) is not started; one still running at the deadline
    is stopped and counts as timed out."""
    waiting = list(runs)
    running: list[tuple[TrialRun, subprocess.Popen, float, list]] = []
    while waiting or running:
        while waiting and len(running) < max(1, jobs):
            run = waiting.pop(0)
            if time.time() + estimate_s * 0.5 > deadline:
                run.skipped = "the budget ran out before it could start"
                on_done(run)
                continue
            running.append(_start(program, run))
        time.sleep(0.05)
        for item in list(running):
            run, proc, started, files = item
            timed_out = False
            if proc.poll() is None:
                if time.time() < deadline:
                    continue
                _stop(proc)
                timed_out = True
            for f in files:
                f.close()
            run.wall_s = time.time() - started
            _read(run, timed_out=timed_out)
            running.remove(item)
            on_done(run)


def _start(program: Program, run: TrialRun):
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(run.capture + suffix)
        except OSError:
            pass
    stdout = open(os.path.join(run.out_dir, f"{run.name}.stdout"), "wb")
    stderr = open(os.path.join(run.out_dir, f"{run.name}.stderr"), "wb")
    argv = [sys.executable, "-m", "dynscope", "explain", "-q", "-o", run.capture, *program_argv(program)]
    env = {**os.environ, ENV: json.dumps({"remedies": run.actions})}
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env,
                            start_new_session=True)
    return run, proc, time.time(), [stdout, stderr]


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.wait()


def _read(run: TrialRun, *, timed_out: bool) -> None:
    from dynscope.analysis.summary import summary_document
    from dynscope.errors import DynscopeError
    from dynscope.model import Capture

    with open(os.path.join(run.out_dir, f"{run.name}.stdout"), "rb") as f:
        stdout = f.read().decode("utf-8", "replace")
    try:
        with Capture.open(run.capture) as capture:
            doc = summary_document(capture)
            outputs = trial_outputs(capture)
            run.features = trial_features(capture)
            applied = applied_actions(capture)
    except (DynscopeError, OSError):
        run.facts = RunFacts(False, None, None, stdout, None, {}, [], timed_out=timed_out)
        return
    notes = tuple(f"{a.get('op')} did not apply" for i, a in enumerate(run.actions) if i not in applied)
    run.summary = doc
    run.facts = RunFacts(True, doc["run"].get("exit_code"), doc["run"].get("signal"), stdout,
                         metrics_from_summary(doc), problem_counts(doc), outputs, notes, timed_out)
