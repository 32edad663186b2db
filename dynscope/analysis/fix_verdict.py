"""Did a remedy work? Outputs compared with the baseline, problems counted, one verdict.

Pure functions of what the runs recorded (summary documents and the compiled regions' outputs,
events ``dynscope:fix_output``), so they are tested without torch. A remedy is never called
working unless its own run proved it: a run that crashed, printed something else, exited
differently or computed different numbers is ``failed`` whatever it did to the problem.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from dynscope.analysis.run_view import RunView
from dynscope.events import CallOutputs, OutputLeaf

Verdict_ = Literal["fixed", "improved", "moved to eager", "no change", "worse", "failed", "not run"]
VERDICTS: tuple[Verdict_, ...] = ("fixed", "improved", "moved to eager", "no change", "worse", "failed", "not run")


@dataclass(frozen=True)
class Metrics:
    graph_breaks: int
    recompiles: int
    errors: int
    compile_s: float
    run_s: float | None
    graphs: int | None = None  # graphs compiled (not in the JSON's metrics: it reads "moved to eager")

    def as_json(self) -> dict[str, int | float | None]:
        return {"graph_breaks": self.graph_breaks, "recompiles": self.recompiles, "errors": self.errors,
                "compile_s": round(self.compile_s, 3), "run_s": None if self.run_s is None else round(self.run_s, 3)}


def metrics_of(view: RunView, program_s: float | None = None) -> Metrics:
    """A run's metrics from its view. ``program_s``: the program's own time, from its start to
    its end under the recorder (the recorder's start-up left out, so runs started differently
    compare)."""
    totals, run, profile = view.totals, view.run, view.profile
    compile_s = float(totals.compile_time_s or 0.0)
    # The run's time outside compiling: measured by `explain --profile` when it ran, else the
    # run's wall time less compile time.
    run_s: float | None
    if profile is not None and profile.wall_s is not None:
        run_s = max(0.0, float(profile.wall_s) - compile_s)
    else:
        duration = program_s if program_s is not None else run.duration_s
        run_s = None if duration is None else max(0.0, float(duration) - compile_s)
    return Metrics(totals.graph_breaks, totals.recompiles, totals.errors, compile_s, run_s, totals.graphs)


@dataclass(frozen=True)
class Comparison:
    equal: bool
    max_abs_diff: float | None  # over every compared value; None when nothing numeric was compared
    notes: tuple[str, ...] = field(default_factory=tuple)


def compare_outputs(baseline: Sequence[CallOutputs], trial: Sequence[CallOutputs], *, rtol: float, atol: float,
                    allow_extra: bool = False) -> Comparison:
    """Each compiled region's outputs, call by call: same calls, same shapes and dtypes, values
    within ``atol + rtol * |baseline|`` (NaN equals NaN)."""
    notes: list[str] = []
    base = {(o.region, o.call): o for o in baseline}
    other = {(o.region, o.call): o for o in trial}
    missing = [k for k in base if k not in other]
    extra = [k for k in other if k not in base]
    if missing:
        notes.append(f"{len(missing)} compiled call(s) of the baseline did not happen (first: {_call(missing[0])})")
    if extra and not allow_extra:
        notes.append(f"{len(extra)} compiled call(s) the baseline did not make (first: {_call(extra[0])})")
    worst: float | None = None
    for key in sorted(base.keys() & other.keys()):
        a, b = base[key].leaves, other[key].leaves
        if len(a) != len(b):
            notes.append(f"{_call(key)}: {len(a)} outputs → {len(b)}")
            continue
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            diff, why = _leaf_diff(x, y, rtol=rtol, atol=atol)
            if diff is not None:
                worst = diff if worst is None or diff > worst or math.isnan(diff) else worst
            if why:
                notes.append(f"{_call(key)} output {i}: {why}")
    return Comparison(not notes, worst, tuple(notes[:5]))


def _call(key: tuple[str, int]) -> str:
    return f"{key[0]} call {key[1]}"


def _shape(shape: tuple[int, ...] | None) -> str:
    return "None" if shape is None else str(list(shape))


def _leaf_diff(x: OutputLeaf, y: OutputLeaf, *, rtol: float, atol: float) -> tuple[float | None, str | None]:
    """(max abs diff, why they differ or None)."""
    if x.kind != y.kind:
        return None, f"{x.kind} → {y.kind}"
    if x.kind != "tensor":
        return None, None if x.value == y.value else f"{x.value!r} → {y.value!r}"
    if x.shape != y.shape or x.dtype != y.dtype:
        return None, f"{x.dtype}{_shape(x.shape)} → {y.dtype}{_shape(y.shape)}"
    xs, ys = x.values, y.values
    if len(xs) != len(ys):
        return None, "different number of recorded values"
    worst = 0.0
    bad = False
    for a, b in zip(xs, ys, strict=True):
        if a is None or b is None:  # NaN is recorded as None
            if (a is None) != (b is None):
                bad, worst = True, math.inf
            continue
        d = abs(a - b)
        worst = max(worst, d)
        if d > atol + rtol * abs(a):
            bad = True
    if not bad and not x.complete and x.hash != y.hash and rtol == 0 and atol == 0:
        bad = True  # exact comparison asked for, and only a sample was recorded: the hash decides
    return worst, (f"max abs diff {worst:.3g} exceeds the tolerance" if bad else None)


@dataclass(frozen=True)
class RunFacts:
    """What one run (baseline or trial) ended with."""

    ran: bool  # a capture was written and read
    exit_code: int | None
    signal: int | None
    stdout: str
    metrics: Metrics | None
    problems: dict[str, int]  # problem key -> count
    outputs: tuple[CallOutputs, ...]
    applied_notes: tuple[str, ...] = ()  # what the child could not apply
    timed_out: bool = False


@dataclass(frozen=True)
class Verdict:
    verdict: Verdict_
    correct: bool | None
    max_abs_diff: float | None
    why: str  # one line


def judge(baseline: RunFacts, trial: RunFacts, targets: list[str], *, rtol: float, atol: float,
          check_stdout: bool = True) -> Verdict:
    """The verdict of one trial on the problems (keys) it targeted. ``check_stdout`` False: a
    program that prints timings or dates is judged on its outputs and exit status alone."""
    if trial.timed_out:
        return Verdict("failed", None, None, "stopped: the budget ran out before the run ended")
    if not trial.ran or trial.metrics is None:
        return Verdict("failed", None, None, f"the run ended before recording ({_ending(trial)})")
    # A baseline that died (of a compile error, say) and a trial that ran to the end: the trial is
    # held to everything the baseline did before it died, and may do more.
    rescued = _failed(baseline) and trial.exit_code == 0 and not trial.signal
    if (trial.exit_code, trial.signal) != (baseline.exit_code, baseline.signal) and not rescued:
        return Verdict("failed", None, None, f"the program ended differently: {_ending(baseline)} → {_ending(trial)}")
    comparison = compare_outputs(baseline.outputs, trial.outputs, rtol=rtol, atol=atol, allow_extra=rescued)
    if not comparison.equal:
        return Verdict("failed", False, comparison.max_abs_diff, "outputs differ: " + "; ".join(comparison.notes))
    if check_stdout and trial.stdout != baseline.stdout and not (rescued and trial.stdout.startswith(baseline.stdout)):
        return Verdict("failed", False, comparison.max_abs_diff, "the program printed something else")
    gone = [k for k in targets if k not in trial.problems]
    reduced = [k for k in targets if k in trial.problems and trial.problems[k] < baseline.problems.get(k, 0)]
    new = [k for k in trial.problems if k not in baseline.problems]
    grew = [k for k in trial.problems if k in baseline.problems and trial.problems[k] > baseline.problems[k]]
    b, t = baseline.metrics, trial.metrics
    more = (t.graph_breaks > b.graph_breaks or t.recompiles > b.recompiles or t.errors > b.errors) if b else False
    note = f" ({'; '.join(trial.applied_notes)})" if trial.applied_notes else ""
    if len(gone) == len(targets) and targets and not new and not grew and not more:
        return Verdict("fixed", True, comparison.max_abs_diff, "the problem is gone, nothing new, outputs equal")
    if (new or grew or more) and not gone:
        what = ", ".join(_short(k) for k in (new or grew)[:2]) or "more breaks/recompiles/errors"
        return Verdict("worse", True, comparison.max_abs_diff, f"new or more problems: {what}{note}")
    if rescued and not gone:
        return Verdict("improved", True, comparison.max_abs_diff,
                       "the program now runs to the end; the problem is still recorded (that code runs in eager)")
    if gone or reduced:
        extra = f"; but new: {', '.join(_short(k) for k in new[:2])}" if new else ""
        if more and b is not None:
            extra += (f"; but breaks {b.graph_breaks} → {t.graph_breaks}, recompiles {b.recompiles} → "
                      f"{t.recompiles}, errors {b.errors} → {t.errors}")
        what = "the problem is gone" if len(gone) == len(targets) else \
            f"{len(gone)} of {len(targets)} gone, {len(reduced)} fewer"
        return Verdict("improved", True, comparison.max_abs_diff, f"{what}{extra}")
    return Verdict("no change", True, comparison.max_abs_diff, f"the problem is still there{note}")


def moved_to_eager(verdict: Verdict, baseline: Metrics | None, trial: Metrics | None, gone: bool) -> Verdict:
    """A graph break whose record vanished (``gone``: every targeted break), judged fixed or
    improved, while the number of graphs did not fall: the code left the graph
    (``torch.compiler.disable`` on the function that broke), it was not made traceable. Applied
    to graph-break rows only (dynscope/fix/session.py)."""
    if verdict.verdict not in ("fixed", "improved") or not gone or baseline is None or trial is None \
            or baseline.graphs is None or trial.graphs is None or trial.graphs < baseline.graphs:
        return verdict
    return Verdict("moved to eager", verdict.correct, verdict.max_abs_diff,
                   f"the break's record is gone but graphs {baseline.graphs} → {trial.graphs}: that code runs in "
                   "eager now, outside the graph")


def _failed(run: RunFacts) -> bool:
    return bool(run.signal) or run.exit_code not in (0, None)


def _ending(run: RunFacts) -> str:
    if run.signal:
        return f"killed by signal {run.signal}"
    return f"exit {run.exit_code}" if run.exit_code is not None else "did not finish"


def _short(key: str) -> str:
    parts = key.split("|")
    return f"{parts[0]} {parts[1]}" if len(parts) > 1 else key


def pick_combined(results: Sequence[tuple[str, Verdict_, Sequence[str], Metrics | None]]) -> list[str]:
    """Remedies to combine, from (remedy key, verdict, target keys, metrics) per trial and problem:
    greedily the proven remedy that covers the most problems not yet covered (fixed before
    improved, then the fewest breaks and recompiles left in its run, then table order), until
    every problem some remedy proved on is covered."""
    rank: dict[Verdict_, int] = {"fixed": 0, "improved": 1}
    covers: dict[str, dict[str, int]] = {}  # remedy -> problem -> rank
    order: list[str] = []
    left: dict[str, int] = {}  # remedy -> breaks + recompiles its run still had
    for key, verdict, targets, metrics in results:
        if key not in order:
            order.append(key)
        left[key] = (metrics.graph_breaks + metrics.recompiles) if metrics else 0
        if verdict in rank:
            for t in targets:
                covers.setdefault(key, {})[t] = min(rank[verdict], covers.get(key, {}).get(t, 9))
    uncovered = {t for c in covers.values() for t in c}
    chosen: list[str] = []
    while uncovered:
        best = min(covers, key=lambda k: (-len(uncovered & covers[k].keys()),
                                          min((covers[k][t] for t in uncovered & covers[k].keys()), default=9),
                                          left[k], order.index(k)))
        gained = uncovered & covers[best].keys()
        if not gained:
            break
        chosen.append(best)
        uncovered -= gained
    return [k for k in order if k in chosen]
