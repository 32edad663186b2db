"""Trials started while the baseline still runs (``dynscope fix --jobs 2`` and more).

The baseline's capture is written event by event, so its problems can be read before it ends
(``read_partial``). A remedy the selection of that partial list already names is started on a
free job slot under a provisional name (``early-N``); when the baseline has ended, the final
selection numbers its trials as a plain run would, and each takes over the early trial of the
same remedy with the same actions (the run is the same run, whatever problems it is judged on),
renamed to the final name; one the final selection does not want is stopped and removed: no
row, not counted (dynscope/fix/speculation.py: the rule of every speculative run). So the document is the one a run without
early trials writes; only the wall time differs.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from dynscope.analysis.fix_view import fix_problems
from dynscope.analysis.remedies import FixProblem, Remedy, SourceReader, remedies_for
from dynscope.errors import DynscopeError
from dynscope.events import Action
from dynscope.fix.plan import Selection
from dynscope.fix.speculation import Speculations
from dynscope.fix.trials import TrialRun
from dynscope.model.fix import Features


def trial_actions(remedy: Remedy) -> list[Action]:
    """What a remedy's trial applies: its action, then the settings it needs with it."""
    return [remedy.action, *remedy.also]


def wanted_early(selection: Selection, started: set[str]) -> list[Remedy]:
    """The remedies of a (partial) selection worth starting now: tried ones not started yet. A
    fallback waits for the final list (it runs only where the first trials did not fix)."""
    return [r for r, _ in selection if r.tried and not r.fallback and r.key not in started]


def baseline_with_early_trials(baseline: TrialRun, early: Speculations, jobs: int, say: Callable[[str], None],
                               selection_of: Callable[[Partial, bool], Selection],
                               read: Callable[[str], Partial | None] | None = None) -> None:
    """The baseline, and beside it, on the free job slots, the trials of the remedies its capture
    already calls for: the table's settings first (``selection_of(partial, True)``: no source read),
    then the source rewrites. Returns when the baseline has ended; early trials may still run."""
    pool = early.pool
    if not pool.start(baseline, 0, lambda run: None):
        return
    since = time.time()
    next_read = 0.0
    while pool.is_running(baseline):
        pool.step(0.1)
        if len(pool.running) >= jobs or time.time() < next_read or not pool.is_running(baseline):
            continue
        asked = time.time()
        partial = (read or read_partial)(baseline.capture)
        cost = time.time() - asked
        for quick in (True, False):
            if partial is None or len(pool.running) >= jobs:
                break
            for remedy in wanted_early(selection_of(partial, quick), early.started_for()):
                if len(pool.running) >= jobs:
                    break
                run = TrialRun(early.next_early_name(), trial_actions(remedy), baseline.out_dir, baseline.cwd,
                               baseline.profile)
                # A run takes at least as long as the baseline has run so far: the budget check's estimate.
                if pool.start(run, time.time() - since, lambda run: None):
                    say(f"started early, beside the baseline: {remedy.title}")
                    early.add(remedy.key, run)
        next_read = time.time() + next_read_in(cost)


class CachedRemedies:
    """``remedies_for`` remembered per problem (its occurrence count aside: no remedy reads it)
    and features: the source rewrites parse whole library files, seconds each, and the partial
    reads of the baseline ask for the same problems again and again."""

    def __init__(self, read: SourceReader | None) -> None:
        self.read = read
        self._known: dict[str, list[Remedy]] = {}
        self._quick: CachedRemedies | None = None

    def __call__(self, problem: FixProblem, features: Features) -> list[Remedy]:
        key = repr((replace(problem, count=0), features))
        if key not in self._known:
            self._known[key] = remedies_for(problem, features, self.read)
        return list(self._known[key])

    def without_rewrites(self) -> CachedRemedies:
        """The same without the source rewrites (no file read): milliseconds, so the settings'
        trials start before the rewrites of the same problem are made."""
        if self._quick is None:
            self._quick = CachedRemedies(None)
        return self._quick


@dataclass(frozen=True)
class Partial:
    """What the baseline's capture holds so far."""

    problems: list[FixProblem]
    features: Features


def read_partial(path: str) -> Partial | None:
    """The baseline's problems and features as recorded so far; None while nothing can be read
    (the child has not opened its capture yet, or a write is under way)."""
    from dynscope.analysis.run_view import run_view
    from dynscope.model import Capture
    from dynscope.model.fix import trial_features

    if not os.path.exists(path):
        return None
    try:
        with Capture.open(path) as capture:
            return Partial(fix_problems(run_view(capture)), trial_features(capture))
    except (DynscopeError, OSError, sqlite3.Error, ValueError):
        return None


def next_read_in(cost_s: float) -> float:
    """Seconds until the next partial read: reading shares the cores with the runs, so at most
    about a fifth of one core goes to it (a large capture is read less often)."""
    return max(0.5, 4 * cost_s)

