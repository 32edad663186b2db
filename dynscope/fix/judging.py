"""How one ``dynscope fix`` judges its runs: against the baseline, on what is stable between two
plain runs, on the whole run (and its time, when ``--profile`` measured it).

The rules are dynscope/analysis/fix_verdict.py's (pure, tested without torch); this holds what
they are applied with, so every trial, the fallbacks' choice and the combined run are judged alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from dynscope.analysis.fix_document import EagerWitness, SecondBaseline
from dynscope.analysis.fix_problems import ProblemKey
from dynscope.analysis.fix_verdict import (
    Metrics,
    RunFacts,
    Unstable,
    Verdict,
    compare_outputs,
    eager_differs,
    judge,
    left_at,
    moved_to_eager,
    slower_times,
    unstable_between,
)


@dataclass(frozen=True)
class Judge:
    base: RunFacts
    rtol: float
    atol: float
    check_stdout: bool
    compare_time: bool  # the runs' times were measured (fix --profile): a slower run is a trade-off
    unstable: Unstable | None = None  # what two plain runs did differently (None: not looked at)
    plain_again: Metrics | None = None  # a second plain run's metrics: how much the time moves by itself
    eager: RunFacts | None = None  # the run with torch.compile off, where the compiled baseline differs from it

    def __call__(self, facts: RunFacts, targets: Sequence[ProblemKey], *, leaves_graph: bool = False) -> Verdict:
        """``leaves_graph``: the remedy runs code outside the graph (torch.compiler.disable): a break it
        removes while the graphs do not fall is "moved to eager", not fixed."""
        verdict = judge(self.base, facts, list(targets), rtol=self.rtol, atol=self.atol, check_stdout=self.check_stdout,
                        unstable=self.unstable, compare_time=self.compare_time, plain_again=self.plain_again,
                        eager=self.eager)
        if leaves_graph and targets and all(k.kind == "break" for k in targets):
            gone = all(left_at(facts.problems, k) == 0 for k in targets)
            return moved_to_eager(verdict, self.base.metrics, facts.metrics, gone)
        return verdict

    def differs(self, facts: RunFacts | None) -> bool:
        """A finished run that computed or printed something other than the baseline: the reason to
        run the program plainly once more (it may differ from itself)."""
        if facts is None or not facts.ran or facts.timed_out:
            return False
        if (facts.exit_code, facts.signal) != (self.base.exit_code, self.base.signal):
            return False  # ended differently: no second plain run explains that
        outputs = compare_outputs(self.base.outputs, facts.outputs, rtol=self.rtol, atol=self.atol)
        return not outputs.equal or (self.check_stdout and facts.stdout != self.base.stdout)

    def slower(self, facts: RunFacts | None) -> bool:
        """A finished run whose time grew clearly over the one plain run: the reason to run the program
        plainly once more (its time may move that much by itself on a busy machine)."""
        if not self.compare_time or facts is None or facts.timed_out or facts.metrics is None or self.base.metrics is None:
            return False
        return bool(slower_times(self.base.metrics, facts.metrics))

    def with_second(self, second: RunFacts, capture: str) -> tuple[Judge, SecondBaseline]:
        """Judged from now on what the two plain runs agree on, and past how much their times differ;
        and what to tell about it."""
        unstable = unstable_between(self.base, second, rtol=self.rtol, atol=self.atol)
        plain_again = second.metrics if self.compare_time else None
        judge = Judge(self.base, self.rtol, self.atol, self.check_stdout, self.compare_time,
                      unstable if unstable.any else None, plain_again)
        times = _time_spread(self.base.metrics, plain_again)
        if not unstable.any:
            return judge, SecondBaseline(capture, (), False, "a second plain run computed and printed the same: "
                                         "the differences are the remedies'" + times)
        return judge, SecondBaseline(capture, unstable.notes, unstable.stdout, unstable.say() + times)


    def with_eager(self, eager: RunFacts, capture: str) -> tuple[Judge, EagerWitness]:
        """Eager as a witness: where the compiled baseline's outputs differ from the run with torch.compile
        off, a trial that computes eager's numbers is judged against eager; and what to tell about it."""
        if eager.exit_code != self.base.exit_code or eager.signal != self.base.signal:
            return self, EagerWitness(capture, False, (), "the program run with torch.compile off ended differently "
                                      f"(exit {eager.exit_code}): not a witness for the outputs")
        differs = eager_differs(self.base, eager, rtol=self.rtol, atol=self.atol, unstable=self.unstable)
        if differs.equal:
            return self, EagerWitness(capture, False, (), "the compiled baseline computes what eager computes")
        message = (f"the compiled baseline's outputs differ from eager's (torch.compile off): {'; '.join(differs.notes[:2])}"
                   f"; a remedy that restores eager's numbers is judged against eager")
        return replace(self, eager=eager), EagerWitness(capture, True, differs.notes, message)


def _time_spread(first: Metrics | None, again: Metrics | None) -> str:
    """The two plain runs' time per call, when measured: a slowdown within their spread is not counted."""
    if first is None or again is None or first.steady_s_per_call is None or again.steady_s_per_call is None:
        return ""
    a, b = sorted((first.steady_s_per_call, again.steady_s_per_call))
    return f"; its time per call moved {a * 1e3:.3g} → {b * 1e3:.3g} ms by itself: a trial is slower only past both"


def won_on(verdict: Verdict, base: RunFacts, facts: RunFacts | None, targets: Sequence[ProblemKey]) -> list[ProblemKey]:
    """The targets a remedy enters the combined change for: all of them when it fixed them, those
    gone or fewer when it improved, none otherwise (a trade-off, however good its own row looks)."""
    if verdict.verdict == "fixed":
        return list(targets)
    if verdict.verdict != "improved" or facts is None:
        return []
    won = [k for k in targets if left_at(facts.problems, k) < left_at(base.problems, k)]
    return won or list(targets)  # improved without a target fewer: a program rescued from its crash
