"""Trials started while the baseline still runs (``dynscope fix --jobs 2`` and more).

The baseline's capture is written event by event, so its problems can be read before it ends
(``read_partial``). A remedy the selection of that partial list already names is started on a
free job slot under a provisional name (``early-N``); when the baseline has ended, the final
selection numbers its trials as a plain run would, and each takes over the early trial of the
same remedy with the same actions (``EarlyTrials.claim``: the run is the same run, whatever
problems it is judged on), renamed to the final name. An early trial the final selection does
not want is stopped and removed: no row, not counted. So the document is the one a run without
early trials writes; only the wall time differs.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field, replace

from dynscope.analysis.remedies import FixProblem, Remedy, SourceReader, problems_of, remedies_for
from dynscope.errors import DynscopeError
from dynscope.events import Action
from dynscope.fix.trials import TrialRun
from dynscope.model.fix import Features

Selection = list[tuple[Remedy, list[FixProblem]]]


def trial_actions(remedy: Remedy) -> list[Action]:
    """What a remedy's trial applies: its action, then the settings it needs with it."""
    return [remedy.action, *remedy.also]


@dataclass
class EarlyTrial:
    remedy_key: str
    actions: list[Action]
    run: TrialRun


@dataclass
class EarlyTrials:
    """The trials started before the baseline ended, until the final selection claims them."""

    trials: list[EarlyTrial] = field(default_factory=list)
    made: int = 0  # early-N names handed out (one never reused in a fix run)

    def wanted(self, selection: Selection) -> list[Remedy]:
        """The remedies of a (partial) selection worth starting now: tried ones not started yet.
        A fallback waits for the final list (it runs only where the first trials did not fix)."""
        started = {t.remedy_key for t in self.trials}
        return [r for r, _ in selection if r.tried and not r.fallback and r.key not in started]

    def next_name(self) -> str:
        self.made += 1
        return f"early-{self.made}"

    def add(self, remedy: Remedy, run: TrialRun) -> None:
        self.trials.append(EarlyTrial(remedy.key, list(run.actions), run))

    def claim(self, remedy: Remedy) -> TrialRun | None:
        """The early run of this very remedy and actions, taken out of the pool of early runs;
        None where there is none (or it was not started: the budget)."""
        for i, trial in enumerate(self.trials):
            if trial.remedy_key == remedy.key and trial.actions == trial_actions(remedy) and trial.run.skipped is None:
                return self.trials.pop(i).run
        return None

    def unclaimed(self) -> list[TrialRun]:
        """What no final trial took: to stop and remove."""
        left = [t.run for t in self.trials]
        self.trials.clear()
        return left


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
            return Partial(problems_of(run_view(capture)), trial_features(capture))
    except (DynscopeError, OSError, sqlite3.Error, ValueError):
        return None


def next_read_in(cost_s: float) -> float:
    """Seconds until the next partial read: reading shares the cores with the runs, so at most
    about a fifth of one core goes to it (a large capture is read less often)."""
    return max(0.5, 4 * cost_s)

