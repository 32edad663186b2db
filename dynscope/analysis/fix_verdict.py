"""Did a remedy work? Outputs compared with the baseline, problems counted, one verdict.

Pure functions of what the runs recorded (summary documents and the compiled regions' outputs,
events ``dynscope:fix_output``), so they are tested without torch. A remedy is never called
working unless its own run proved it: a run that crashed, printed something else, exited
differently or computed different numbers is ``failed`` whatever it did to the problem, and a
remedy is judged on the whole run: one that removes its problem while breaks, recompiles or (where
measured) time grow elsewhere is a ``trade-off``, never ``improved``, never in the combined change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from dynscope.analysis.fix_problems import ProblemKey
from dynscope.analysis.fix_stdout import same_stdout, unstable_lines
from dynscope.analysis.run_view import RunView
from dynscope.events import CallOutputs, OutputLeaf

Verdict_ = Literal["fixed", "improved", "moved to eager", "trade-off", "no change", "worse", "failed", "not run"]
VERDICTS: tuple[Verdict_, ...] = ("fixed", "improved", "moved to eager", "trade-off", "no change", "worse", "failed", "not run")
WINS: tuple[Verdict_, ...] = ("fixed", "improved")  # the verdicts a remedy enters the combined change with
STOPPED = "stopped by the budget before the run ended"
# Eager is a witness: where the compiled baseline computes other numbers than the program run with
# torch.compile off, a trial that computes eager's numbers is judged against eager's run.
MATCHES_EAGER = "matches eager; the compiled baseline differs"

# A run is slower when a time grew by more than this share and these seconds (per compiled call,
# and over the whole run): timings on a shared machine move by a few percent, and only a clear
# slowdown makes a trade-off.
SLOWER_SHARE = 0.25
SLOWER_CALL_S = 1e-4
SLOWER_RUN_S = 0.5


@dataclass(frozen=True)
class Metrics:
    graph_breaks: int
    recompiles: int
    errors: int
    compile_s: float
    run_s: float | None
    graphs: int | None = None  # graphs compiled (None: not counted)
    steady_s_per_call: float | None = None  # `--profile`: a compiled call's time once nothing compiles any more

    def as_json(self) -> dict[str, int | float | None]:
        return {"graph_breaks": self.graph_breaks, "recompiles": self.recompiles, "errors": self.errors,
                "compile_s": round(self.compile_s, 3), "run_s": None if self.run_s is None else round(self.run_s, 3),
                "graphs": self.graphs,
                "steady_s_per_call": None if self.steady_s_per_call is None else round(self.steady_s_per_call, 6)}


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
    steady: float | None = None
    if profile is not None:
        calls = sum(e.steady_calls for e in profile.entries if e.steady_calls > 0)
        seconds = sum(e.seconds for e in profile.entries if e.steady_calls > 0)
        steady = seconds / calls if calls else None
    return Metrics(totals.graph_breaks, totals.recompiles, totals.errors, compile_s, run_s, totals.graphs, steady)


@dataclass(frozen=True)
class Comparison:
    equal: bool
    max_abs_diff: float | None  # over every compared value; None when nothing numeric was compared
    notes: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Unstable:
    """What differs between two plain runs of the program (it seeds from the clock, calls
    ``torch.seed()``...): left out of every comparison, so remedies are judged on what is stable."""

    leaves: frozenset[tuple[str, int, int]] = frozenset()  # (region, call, output index)
    calls: frozenset[tuple[str, int]] = frozenset()  # calls one plain run made and the other did not, or of other arity
    stdout: bool = False  # the two plain runs printed different things
    notes: tuple[str, ...] = ()  # what differed, in words
    stdout_lines: frozenset[int] = frozenset()  # the lines of the first run's stdout (0-based) the second moved

    @property
    def any(self) -> bool:
        return bool(self.leaves or self.calls or self.stdout)

    def say(self) -> str:
        what = "; ".join(self.notes[:3]) or "nothing"
        return f"outputs differ between two plain runs: {what}; compared on what is stable"


def unstable_between(first: RunFacts, second: RunFacts, *, rtol: float, atol: float) -> Unstable:
    """What two plain runs of the same program did differently (each output leaf, call and stdout)."""
    a = {(o.region, o.call): o for o in first.outputs}
    b = {(o.region, o.call): o for o in second.outputs}
    calls = {k for k in a.keys() ^ b.keys()}
    leaves: set[tuple[str, int, int]] = set()
    notes: list[str] = []
    if calls:
        notes.append(f"{len(calls)} compiled call(s) made by one run only (first: {_call(sorted(calls)[0])})")
    for key in sorted(a.keys() & b.keys()):
        x, y = a[key].leaves, b[key].leaves
        if len(x) != len(y):
            calls.add(key)
            notes.append(f"{_call(key)}: {len(x)} outputs → {len(y)}")
            continue
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            _, why = _leaf_diff(u, v, rtol=rtol, atol=atol)
            if why:
                leaves.add((key[0], key[1], i))
                if len(notes) < 5:
                    notes.append(f"{_call(key)} output {i}: {why}")
    stdout = first.stdout != second.stdout
    if stdout:
        notes.append("stdout")
    lines = unstable_lines(first.stdout, second.stdout) if stdout else frozenset()
    return Unstable(frozenset(leaves), frozenset(calls), stdout, tuple(notes), lines)


def compare_outputs(baseline: Sequence[CallOutputs], trial: Sequence[CallOutputs], *, rtol: float, atol: float,
                    allow_extra: bool = False, unstable: Unstable | None = None) -> Comparison:
    """Each compiled region's outputs, call by call: same calls, same shapes and dtypes, values
    within ``atol + rtol * |baseline|`` (NaN equals NaN); what ``unstable`` names is left out."""
    skip = unstable or Unstable()
    notes: list[str] = []
    base = {(o.region, o.call): o for o in baseline if (o.region, o.call) not in skip.calls}
    other = {(o.region, o.call): o for o in trial if (o.region, o.call) not in skip.calls}
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
            if (key[0], key[1], i) in skip.leaves:
                continue
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
    problems: dict[ProblemKey, int]  # problem key -> count
    outputs: tuple[CallOutputs, ...]
    applied_notes: tuple[str, ...] = ()  # what the child could not apply
    timed_out: bool = False


@dataclass(frozen=True)
class Verdict:
    verdict: Verdict_
    correct: bool | None
    max_abs_diff: float | None
    why: str  # one line


def judge(baseline: RunFacts, trial: RunFacts, targets: list[ProblemKey], *, rtol: float, atol: float,
          check_stdout: bool = True, unstable: Unstable | None = None, compare_time: bool = False,
          plain_again: Metrics | None = None, eager: RunFacts | None = None) -> Verdict:
    """The verdict of one trial on the problems (keys) it targeted, and on the whole run.
    ``check_stdout`` False: a program that prints timings or dates is judged on its outputs and exit
    status alone. ``unstable``: what two plain runs did differently, left out of the comparison.
    ``compare_time``: the runs' times were measured (``--profile``), and a slower run is a trade-off.
    ``plain_again``: a second plain run's metrics; a time is then slower only past the slower of both
    plain runs by SLOWER_SHARE plus what they differ by. ``eager``: the program run with torch.compile
    off, given where the compiled baseline's outputs differ from it; a trial whose outputs and stdout
    are eager's is not failed for differing from the compiled baseline (its why says so)."""
    if trial.timed_out:
        return Verdict("not run", None, None, STOPPED)
    if not trial.ran or trial.metrics is None:
        return Verdict("failed", None, None, f"the run ended before recording ({_ending(trial)})")
    # A baseline that died (of a compile error, say) and a trial that ran to the end: the trial is
    # held to everything the baseline did before it died, and may do more.
    rescued = _failed(baseline) and trial.exit_code == 0 and not trial.signal
    if (trial.exit_code, trial.signal) != (baseline.exit_code, baseline.signal) and not rescued:
        return Verdict("failed", None, None, f"the program ended differently: {_ending(baseline)} → {_ending(trial)}")
    comparison = compare_outputs(baseline.outputs, trial.outputs, rtol=rtol, atol=atol, allow_extra=rescued,
                                 unstable=unstable)
    witness = _eager_witness(comparison, trial, eager, rtol=rtol, atol=atol, unstable=unstable)
    if witness is not None:
        comparison, printed = witness, eager.stdout if eager is not None else baseline.stdout
    else:
        printed = baseline.stdout
    if not comparison.equal:
        return Verdict("failed", False, comparison.max_abs_diff, "outputs differ: " + "; ".join(comparison.notes))
    # stdout line by line: only the lines that differed between the two plain runs are left out
    lines_moved = unstable.stdout_lines if unstable is not None else frozenset()
    if (check_stdout and not same_stdout(printed, trial.stdout, lines_moved)
            and not (rescued and trial.stdout.startswith(printed))):
        return Verdict("failed", False, comparison.max_abs_diff, "the program printed something else")
    verdict = _on_problems(baseline, trial, targets, comparison, rescued=rescued, compare_time=compare_time,
                           plain_again=plain_again)
    return verdict if witness is None else replace(verdict, why=f"{verdict.why}; {MATCHES_EAGER}")


def _eager_witness(comparison: Comparison, trial: RunFacts, eager: RunFacts | None, *, rtol: float, atol: float,
                   unstable: Unstable | None) -> Comparison | None:
    """The comparison with the eager run, where the trial's outputs differ from the compiled baseline's
    and equal eager's (None: the baseline is the reference)."""
    if comparison.equal or eager is None:
        return None
    with_eager = compare_outputs(eager.outputs, trial.outputs, rtol=rtol, atol=atol, unstable=unstable)
    return with_eager if with_eager.equal else None


def eager_differs(baseline: RunFacts, eager: RunFacts, *, rtol: float, atol: float,
                  unstable: Unstable | None = None) -> Comparison:
    """The compiled baseline's outputs held to the eager run's (what two plain runs moved left out)."""
    return compare_outputs(eager.outputs, baseline.outputs, rtol=rtol, atol=atol, unstable=unstable)


def _on_problems(baseline: RunFacts, trial: RunFacts, targets: list[ProblemKey], comparison: Comparison, *,
                 rescued: bool, compare_time: bool, plain_again: Metrics | None) -> Verdict:
    """The verdict of a trial whose outputs and stdout passed: on its problems and on the whole run."""
    assert trial.metrics is not None
    # A break's problem is gone only when its line breaks no more, for any reason.
    gone = [k for k in targets if left_at(trial.problems, k) == 0]
    reduced = [k for k in targets if 0 < left_at(trial.problems, k) < left_at(baseline.problems, k)]
    moved = [k for k in targets if k not in trial.problems and left_at(trial.problems, k) > 0]
    # A target's line breaking under another name is that problem still there, not a new one.
    target_sites = {k.site for k in targets} - {None}
    new = [k for k in trial.problems if k not in baseline.problems and k.site not in target_sites]
    grew = [k for k in trial.problems if k in baseline.problems and trial.problems[k] > baseline.problems[k]]
    grew += [k for k in targets if k not in grew and left_at(trial.problems, k) > left_at(baseline.problems, k)]
    growth = _growth(baseline.metrics, trial.metrics, compare_time, plain_again)
    note = f" ({'; '.join(trial.applied_notes)})" if trial.applied_notes else ""
    if len(gone) == len(targets) and targets and not new and not grew and not growth:
        return Verdict("fixed", True, comparison.max_abs_diff, "the problem is gone, nothing new, outputs equal")
    if rescued and not gone:
        return Verdict("improved", True, comparison.max_abs_diff,
                       "the program now runs to the end; the problem is still recorded (that code runs in eager)")
    if (new or grew or growth) and not gone and not reduced:
        what = ", ".join(k.short for k in (new or grew)[:2]) or "; ".join(growth)
        return Verdict("worse", True, comparison.max_abs_diff, f"new or more problems: {what}{note}")
    if gone or reduced:
        what = "the problem is gone" if len(gone) == len(targets) else \
            f"{len(gone)} of {len(targets)} gone, {len(reduced)} fewer"
        but = [f"new: {', '.join(k.short for k in new[:2])}"] if new else []
        but += [f"more: {', '.join(k.short for k in grew[:2])}"] if grew else []
        # Something else grew over the whole run, or problems elsewhere took the place of those gone
        # and the run has no fewer breaks, recompiles and errors than before: a trade-off.
        if growth or (but and not _fewer(baseline.metrics, trial.metrics)):
            numbers = growth or _whole_run(baseline.metrics, trial.metrics)
            return Verdict("trade-off", True, comparison.max_abs_diff, f"{what}, but {'; '.join(but + numbers)}")
        return Verdict("improved", True, comparison.max_abs_diff, f"{what}{'; but ' + '; '.join(but) if but else ''}")
    if moved:
        return Verdict("no change", True, comparison.max_abs_diff,
                       f"the line still breaks, for another reason: {_same_site(trial.problems, moved[0]).short}{note}")
    return Verdict("no change", True, comparison.max_abs_diff, f"the problem is still there{note}")


def left_at(problems: Mapping[ProblemKey, int], key: ProblemKey) -> int:
    """Occurrences of a problem still in a run: for a graph break, every break at its line, whatever
    torch now calls it (a line that breaks for another reason is not fixed); else the key's own."""
    site = key.site
    if site is None:
        return problems.get(key, 0)
    return sum(n for k, n in problems.items() if k.site == site)


def _same_site(problems: Mapping[ProblemKey, int], key: ProblemKey) -> ProblemKey:
    site = key.site
    return next((k for k in problems if site is not None and k.site == site), key)


def _growth(before: Metrics | None, after: Metrics, compare_time: bool, plain_again: Metrics | None = None) -> list[str]:
    """What grew over the whole run: breaks, recompiles, errors, and with ``compare_time`` the time."""
    if before is None:
        return []
    grew = [f"{name} {b} → {a}" for name, b, a in (("breaks", before.graph_breaks, after.graph_breaks),
                                                    ("recompiles", before.recompiles, after.recompiles),
                                                    ("errors", before.errors, after.errors)) if a > b]
    if compare_time:
        grew += slower_times(before, after, plain_again)
    return grew


def slower_times(before: Metrics, after: Metrics, plain_again: Metrics | None = None) -> list[str]:
    """The times that grew clearly: by more than SLOWER_SHARE and the least seconds; with a second plain
    run, past the slower of the two plain runs by SLOWER_SHARE plus what they differ by (how much the
    program's time moves by itself on this machine)."""
    grew = []
    for name, pick, least in (("time per call", _steady, SLOWER_CALL_S), ("run time outside compiling", _run, SLOWER_RUN_S)):
        b_s, a_s = pick(before), pick(after)
        if b_s is None or a_s is None:
            continue
        again = pick(plain_again) if plain_again is not None else None
        plain, spread = (b_s, 0.0) if again is None else (max(b_s, again), abs(b_s - again))
        if a_s > plain * (1 + SLOWER_SHARE) + spread and a_s - plain > least:
            grew.append(f"{name} {_seconds(b_s)} → {_seconds(a_s)}")
    return grew


def _steady(m: Metrics) -> float | None:
    return m.steady_s_per_call


def _run(m: Metrics) -> float | None:
    return m.run_s


def _fewer(before: Metrics | None, after: Metrics) -> bool:
    """The whole run has fewer breaks, recompiles and errors together than before."""
    return before is not None and (after.graph_breaks + after.recompiles + after.errors
                                   < before.graph_breaks + before.recompiles + before.errors)


def _whole_run(before: Metrics | None, after: Metrics) -> list[str]:
    """The whole run's numbers, before → after, as a trade-off row shows them."""
    if before is None:
        return []
    out = [f"breaks {before.graph_breaks} → {after.graph_breaks}", f"recompiles {before.recompiles} → {after.recompiles}"]
    if after.errors != before.errors:
        out.append(f"errors {before.errors} → {after.errors}")
    b_s, a_s = _total(before), _total(after)
    if b_s is not None and a_s is not None:
        out.append(f"time {_seconds(b_s)} → {_seconds(a_s)}")
    return out


def _total(m: Metrics) -> float | None:
    return None if m.run_s is None else m.compile_s + m.run_s


def _seconds(s: float) -> str:
    return f"{s:.3g} s"
def moved_to_eager(verdict: Verdict, baseline: Metrics | None, trial: Metrics | None, gone: bool) -> Verdict:
    """A graph break whose record vanished (``gone``: every targeted break), judged fixed or
    improved, while the number of graphs did not fall: the code left the graph
    (``torch.compiler.disable`` on the function that broke), it was not made traceable. Applied
    to graph-break rows only (the Judge of dynscope/fix/judging.py)."""
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


def pick_combined(results: Sequence[tuple[str, Verdict_, Sequence[ProblemKey], Metrics | None]],
                  conflict: Callable[[str, str], bool] = lambda _a, _b: False,
                  kept_in_code: Callable[[str], bool] = lambda _k: False,
                  private: Callable[[str], bool] = lambda _k: False) -> list[str]:
    """Remedies to combine, from (remedy key, verdict, the target keys it won on, metrics of its
    run): only the remedies that won (``fixed``, ``improved``; a trade-off never enters). Best first:
    a fixed remedy before an improved one (never left out for one whose run ended worse), then the
    fewest breaks and recompiles its whole run had, then the most problems covered, then a change
    that uses no ``private`` torch name (a public setting before ``torch._higher_order_ops``), then one
    ``kept_in_code`` (a source rewrite: the written diff alone reproduces it), then table order;
    each taken while it covers a problem not yet covered and does not ``conflict`` with one already
    taken (``mark_dynamic(x, 1)`` and ``dynamic=True``: the better whole run is kept)."""
    rank: dict[Verdict_, int] = {"fixed": 0, "improved": 1}
    covers: dict[str, dict[ProblemKey, int]] = {}  # remedy -> problem -> rank
    order: list[str] = []
    left: dict[str, int] = {}  # remedy -> breaks + recompiles its run still had
    for key, verdict, targets, metrics in results:
        if key not in order:
            order.append(key)
        left[key] = (metrics.graph_breaks + metrics.recompiles) if metrics else 0
        if verdict in rank:
            for t in targets:
                covers.setdefault(key, {})[t] = min(rank[verdict], covers.get(key, {}).get(t, 9))
    candidates = sorted(covers, key=lambda k: (min(covers[k].values()), left[k], -len(covers[k]),
                                                private(k), not kept_in_code(k), order.index(k)))
    uncovered = {t for c in covers.values() for t in c}
    chosen: list[str] = []
    for key in candidates:
        if not uncovered & covers[key].keys() or any(conflict(key, other) for other in chosen):
            continue
        chosen.append(key)
        uncovered -= covers[key].keys()
    return [k for k in order if k in chosen]
