"""``dynscope numerics --try-remedies``: which remedies of the table to try for the first suspect, and
how a trial is judged. Pure functions of recorded events: no torch, no processes.

``fix`` judges a remedy by equal outputs; a numerics remedy is judged by the error it removes: the
trial reruns the program with the remedy applied and the numerics check on, and the remedy is
**verified** when the trial's verdict is no longer "suspect" (the first suspect's compiled error is
back within the criterion's bound of eager's own error, and no other node became suspect).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dynscope.analysis.remedies import TABLE, FixProblem, Remedy
from dynscope.events import NumericsChecked, NumericsNode
from dynscope.model.fix import Features
from dynscope.numerics.criterion import NONFINITE_ERROR

INDUCTOR = "torch._inductor.config"
# Table entries that only set an Inductor option: safe to try even where the suspect's facts say they
# will not help (a float32 program, an op that draws no random numbers) -- the trial shows it.
SETTING_ENTRIES = ("emulate_precision_casts", "fallback_random")

Expectation = Literal["expected", "long_shot"]


@dataclass(frozen=True)
class Candidate:
    entry: str  # the remedy table's entry name
    remedy: Remedy
    expectation: Expectation  # "expected": the table says it applies to this suspect; "long_shot": tried anyway


def candidates(problem: FixProblem, features: Features) -> list[Candidate]:
    """The numerics remedies to try, in table order: each entry that applies, and each setting-only entry
    this torch offers (not already on) even where the suspect's facts do not call for it."""
    out: list[Candidate] = []
    for entry in TABLE:
        if "numerics" not in entry.serves or entry.remedy is None:
            continue
        if entry.applies(problem, features):
            out.append(Candidate(entry.name, entry.remedy(problem, features), "expected"))
        elif entry.name in SETTING_ENTRIES and features.configs.get(f"{INDUCTOR}.{entry.name}", True) is not True:
            out.append(Candidate(entry.name, entry.remedy(problem, features), "long_shot"))
    return out


@dataclass(frozen=True)
class RunNumbers:
    """One run's side of the comparison."""

    verdict: str  # the run's numerics verdict ("" when the run checked no graph)
    compiled_error: float | None  # the first suspect's node in this run (None: not found, or non-finite)
    eager_error: float | None
    suspect: bool | None  # that node fails the criterion here (None: not found)
    program_s: float | None  # the program's own wall time (the check's time taken out)


@dataclass(frozen=True)
class RemedyOutcome:
    entry: str
    title: str
    patch: str
    expectation: Expectation
    before: RunNumbers
    after: RunNumbers | None  # None: the trial recorded no numerics check
    applied: bool  # the trial child applied the remedy
    verified: bool
    note: str = ""


def matching_node(nodes: tuple[NumericsNode, ...], suspect: NumericsNode) -> NumericsNode | None:
    """The suspect's node in another run: same graph, direction and name, else the same op on the same line."""
    same = [n for n in nodes if (n.graph, n.direction, n.node) == (suspect.graph, suspect.direction, suspect.node)]
    if not same:
        same = [n for n in nodes if n.direction == suspect.direction and n.op == suspect.op and n.source == suspect.source]
    return same[0] if same else None


def _error(value: float) -> float | None:
    return None if value >= NONFINITE_ERROR else value


def numbers(record: NumericsChecked | None, suspect: NumericsNode, program_s: float | None) -> RunNumbers:
    if record is None or record.graphs_checked == 0:
        return RunNumbers("", None, None, None, program_s)
    node = matching_node(record.nodes, suspect)
    return RunNumbers(record.verdict, None if node is None else _error(node.compiled_error),
                      None if node is None else _error(node.eager_error), None if node is None else node.suspect,
                      program_s)


def judge(candidate: Candidate, before: RunNumbers, after: RunNumbers | None, *, applied: bool) -> RemedyOutcome:
    """Verified: the remedy took effect and the trial's check found no suspect (verdict "within", or
    "nondeterministic": within, with nodes that differ run to run)."""
    note = ""
    if after is None or not after.verdict:
        note = "the trial checked no Inductor graph (the remedy may have left nothing compiled)"
    elif not applied:
        note = "the remedy did not apply in the trial"
    elif after.suspect is None and after.verdict != "suspect":
        note = "the suspect's node is no longer in the compiled graph"
    verified = applied and after is not None and after.verdict in ("within", "nondeterministic")
    return RemedyOutcome(candidate.entry, candidate.remedy.title, candidate.remedy.patch, candidate.expectation,
                         before, after, applied, verified, note)


def numbers_json(n: RunNumbers | None) -> dict[str, object] | None:
    if n is None:
        return None
    return {"verdict": n.verdict, "compiled_error": n.compiled_error, "eager_error": n.eager_error,
            "suspect": n.suspect, "program_s": None if n.program_s is None else round(n.program_s, 4)}


def outcome_json(o: RemedyOutcome) -> dict[str, object]:
    return {"entry": o.entry, "title": o.title, "patch": o.patch, "expectation": o.expectation, "applied": o.applied,
            "verified": o.verified, "before": numbers_json(o.before), "after": numbers_json(o.after), "note": o.note}


def remedies_exit_status(outcomes: list[RemedyOutcome]) -> int:
    """0 when a remedy was verified, 1 otherwise."""
    return 0 if any(o.verified for o in outcomes) else 1
