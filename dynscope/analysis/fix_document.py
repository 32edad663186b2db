"""The result of one ``dynscope fix``: a tree of dataclasses, and its JSON (schema ``dynscope.fix/2``).

dynscope/fix/session.py builds it; every view formats it: the terminal table
(reporters/fix_table.py), ``--md`` Markdown (reporters/markdown.py), ``-o`` JSON (``to_json``,
field for field as docs/fix-json.md documents it) and the verified fixes recorded into the
program's capture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dynscope.analysis.fix_verdict import Metrics, Verdict_
from dynscope.analysis.remedies import AppliesAs, FixProblem, Remedy
from dynscope.analysis.source_edits import SourceEdit
from dynscope.events import FixFamily, JsonValue

SCHEMA = "dynscope.fix/2"

Json = dict[str, JsonValue]


@dataclass(frozen=True)
class ProblemRow:
    """A problem as the document names it; ``kind`` "any": a --try row judged on every problem."""

    kind: FixFamily | Literal["any"]
    file: str | None
    line: int | None
    function: str | None
    detail: str
    count: int

    @classmethod
    def of(cls, p: FixProblem) -> ProblemRow:
        return cls(p.family, p.file, p.line, p.function, p.detail, p.count)

    def to_json(self) -> Json:
        return {"kind": self.kind, "file": self.file, "line": self.line, "function": self.function,
                "detail": self.detail, "count": self.count}


@dataclass(frozen=True)
class Measured:
    """A run's metrics (absent: none recorded), with one problem's occurrences in it (``count``)."""

    metrics: Metrics | None
    count: int | None = None

    def to_json(self) -> Json:
        out: Json = dict(self.metrics.as_json()) if self.metrics else {}
        if self.count is not None:
            out["count"] = self.count
        return out


@dataclass(frozen=True)
class SecondBaseline:
    """The program run plainly a second time (made only when a trial's outputs or stdout differed
    from the first run): what differs between the two is left out of every comparison."""

    capture: str
    differs: tuple[str, ...]  # what differed between the two plain runs, in words (empty: nothing)
    stdout_differs: bool
    message: str  # the line the user is told

    def to_json(self) -> Json:
        return {"capture": self.capture, "differs": list(self.differs), "stdout_differs": self.stdout_differs,
                "message": self.message}


@dataclass(frozen=True)
class EagerWitness:
    """The program run with torch.compile off (``torch._dynamo.config.disable``), made beside the second
    plain run when a trial's outputs differed: where the compiled baseline differs from it, a trial
    that matches eager is judged against eager (docs/fix-json.md)."""

    capture: str
    differs: bool  # the compiled baseline's outputs differ from eager's
    notes: tuple[str, ...]  # how they differ, in words
    message: str  # the line the user is told (first, where they differ)

    def to_json(self) -> Json:
        return {"capture": self.capture, "compiled_differs": self.differs, "differs": list(self.notes),
                "message": self.message}


@dataclass(frozen=True)
class Baseline:
    metrics: Metrics | None
    exit_code: int | None
    capture: str
    wall_s: float | None
    second: SecondBaseline | None = None
    eager: EagerWitness | None = None  # the eager run (made only with a second plain run that a difference asked for)

    def to_json(self) -> Json:
        out: Json = {**(self.metrics.as_json() if self.metrics else {}), "exit_code": self.exit_code,
                     "capture": self.capture, "wall_s": self.wall_s}
        if self.second is not None:
            out["second_run"] = self.second.to_json()
        if self.eager is not None:
            out["eager_run"] = self.eager.to_json()
        return out


@dataclass(frozen=True)
class RewriteNote:
    """A source rewrite's row: which catalogue rule, the break's real cause, the file it changes."""

    rule: str
    cause: str
    file: str  # as the diff names it: relative to the program's tree, or <package>/... in a library
    package: str | None  # the installed distribution changed; None: the program's own file
    version: str | None

    @classmethod
    def of(cls, remedy: Remedy) -> RewriteNote | None:
        if remedy.rule is None or not remedy.edits:
            return None
        changed = remedy.edits[0].file
        return cls(remedy.rule, remedy.cause or "", changed.shown, changed.package, changed.version)

    def to_json(self) -> Json:
        return {"rule": self.rule, "cause": self.cause, "file": self.file, "package": self.package,
                "version": self.version}


@dataclass(frozen=True)
class TrialRow:
    """One remedy, judged on every problem it was tried for (``problem`` the first of ``problems``)."""

    problem: ProblemRow
    remedy: str  # the change in one line
    remedy_key: str
    applies_as: AppliesAs
    patch: str
    before: Measured
    verdict: Verdict_
    why: str
    after: Measured | None = None
    correct: bool | None = None
    max_abs_diff: float | None = None
    capture: str | None = None  # the trial's capture, when it ran
    wall_s: float | None = None
    problems: tuple[ProblemRow, ...] = ()  # every problem it serves (empty: just ``problem``)
    rewrite: RewriteNote | None = None  # a source rewrite's rule, cause and file

    @property
    def served(self) -> tuple[ProblemRow, ...]:
        return self.problems or (self.problem,)

    def to_json(self) -> Json:
        out: Json = {"problem": self.problem.to_json(), "problems": [p.to_json() for p in self.served],
                     "remedy": self.remedy, "remedy_key": self.remedy_key,
                     "applies_as": self.applies_as, "patch": self.patch, "before": self.before.to_json(),
                     "after": None if self.after is None else self.after.to_json(), "correct": self.correct,
                     "max_abs_diff": self.max_abs_diff, "verdict": self.verdict, "why": self.why}
        if self.capture is not None:
            out.update(capture=self.capture, wall_s=self.wall_s)
        if self.rewrite is not None:
            out["rewrite"] = self.rewrite.to_json()
        return out


@dataclass(frozen=True)
class Combined:
    """The proven remedies run together."""

    remedies: tuple[str, ...]
    patch: str
    ran: bool  # False: it is a single trial's run
    verdict: Verdict_
    why: str
    after: Metrics | None = None
    correct: bool | None = None
    max_abs_diff: float | None = None
    capture: str | None = None  # set when it was judged
    problems_left: tuple[str, ...] = ()  # keys of every problem its run still had, targeted or not
    edits: tuple[SourceEdit, ...] = ()  # the source rewrites merged, one per file (--diff, --apply write them)
    conflicts: tuple[str, ...] = ()  # rewrites left out: they changed lines an earlier one changed
    settings: tuple[str, ...] = ()  # config lines the merged rewrites need with them ("torch._dynamo.config.x = True")

    def to_json(self) -> Json:
        out: Json = {"remedies": list(self.remedies), "patch": self.patch, "ran": self.ran, "verdict": self.verdict,
                     "why": self.why, "after": None if self.after is None else dict(self.after.as_json()),
                     "correct": self.correct, "max_abs_diff": self.max_abs_diff}
        if self.capture is not None:
            out.update(capture=self.capture, problems_left=list(self.problems_left))
        if self.conflicts:
            out["conflicts"] = list(self.conflicts)
        return out

    @property
    def verified(self) -> bool:
        """Its run proved it: the changes --diff and --apply write."""
        return self.verdict in ("fixed", "improved") and self.correct is True


@dataclass(frozen=True)
class FixDocument:
    command: tuple[str, ...]  # the program's own command
    cwd: str
    torch_version: str | None
    out_dir: str
    baseline: Baseline
    problems: tuple[ProblemRow, ...]
    trials: tuple[TrialRow, ...]
    combined: Combined | None
    runs: int
    jobs: int
    budget_s: float
    wall_s: float
    files_unchanged: bool
    stdin: str
    scratch_copies: bool
    stdout_checked: bool
    profiled: bool
    rtol: float
    atol: float

    def to_json(self) -> Json:
        return {
            "schema": SCHEMA,
            "program": {"command": list(self.command), "cwd": self.cwd},
            "torch_version": self.torch_version,
            "out_dir": self.out_dir,
            "baseline": self.baseline.to_json(),
            "problems": [p.to_json() for p in self.problems],
            "trials": [t.to_json() for t in self.trials],
            "combined": None if self.combined is None else self.combined.to_json(),
            "runs": self.runs,
            "jobs": self.jobs,
            "budget_s": self.budget_s,
            "wall_s": self.wall_s,
            "files_unchanged": self.files_unchanged,
            "stdin": self.stdin,
            "scratch_copies": self.scratch_copies,
            "stdout_checked": self.stdout_checked,
            "profiled": self.profiled,
            "rtol": self.rtol,
            "atol": self.atol,
        }


# -- the table every view of a fix document shows ------------------------------------------------

FIX_COLUMNS = ("problem", "remedy", "breaks", "recompiles", "graphs", "compile", "run", "outputs", "verdict")


def fix_cells(row: TrialRow) -> dict[str, str]:
    """One trial row as the table's cells (plain text), by column."""
    p = row.problem
    where = f" at {_base(p.file)}:{p.line}" if p.file else ""
    before = row.before.metrics
    after = row.after.metrics if row.after else None
    more = f" (+{len(row.served) - 1} more)" if len(row.served) > 1 and p.kind != "any" else ""
    return {
        "problem": f"{p.detail}{where}{more}",
        "remedy": row.remedy,
        "breaks": _arrow(_of(before, "graph_breaks"), _of(after, "graph_breaks")),
        "recompiles": _arrow(_of(before, "recompiles"), _of(after, "recompiles")),
        "graphs": _arrow(_of(before, "graphs"), _of(after, "graphs")),
        "compile": _arrow(_of(before, "compile_s"), _of(after, "compile_s"), " s"),
        "run": _run_cell(before, after),
        "outputs": _outputs(row),
        "verdict": row.verdict,
    }


def _run_cell(before: Metrics | None, after: Metrics | None) -> str:
    """The steady time per compiled call where ``--profile`` measured it (milliseconds), else the run's time."""
    if before is not None and before.steady_s_per_call is not None:
        b = f"{before.steady_s_per_call * 1000:.3g}"
        a = None if after is None or after.steady_s_per_call is None else f"{after.steady_s_per_call * 1000:.3g}"
        return f"{b} → {a} ms/call" if a is not None else f"{b} ms/call"
    return _arrow(_of(before, "run_s"), _of(after, "run_s"), " s")


def _of(metrics: Metrics | None, column: Literal["graph_breaks", "recompiles", "graphs", "compile_s", "run_s"]
        ) -> int | float | None:
    """A metric as the document shows it (seconds rounded to the millisecond); None without metrics."""
    if metrics is None:
        return None
    match column:
        case "graph_breaks":
            return metrics.graph_breaks
        case "recompiles":
            return metrics.recompiles
        case "graphs":
            return metrics.graphs
        case "compile_s":
            return round(metrics.compile_s, 3)
        case "run_s":
            return None if metrics.run_s is None else round(metrics.run_s, 3)


def _outputs(row: TrialRow) -> str:
    if row.correct is None:
        return ""
    diff = row.max_abs_diff
    if not row.correct:
        return "differ" + (f" (max {diff:.3g})" if diff is not None else "")
    return "equal" if not diff else f"equal (max {diff:.1g})"


def _arrow(before: int | float | None, after: int | float | None, unit: str = "") -> str:
    if before is None and after is None:
        return ""

    def show(v: int | float | None) -> str:
        if v is None:
            return "?"
        return f"{v:.1f}" if isinstance(v, float) else str(v)
    return f"{show(before)} → {show(after)}{unit}" if after is not None else f"{show(before)}{unit}"


def _base(path: str | None) -> str:
    return (path or "?").replace("\\", "/").rsplit("/", 1)[-1]


def combined_numbers(doc: FixDocument, combined: Combined) -> str:
    """The combined run's breaks and recompiles before → after; a run that did not happen says so
    (and why), never "breaks 56 → None"."""
    base, after = doc.baseline.metrics, combined.after
    if after is None or base is None:
        return f"not run: {combined.why}" if after is None else "no baseline to compare with"
    return f"breaks {base.graph_breaks} → {after.graph_breaks}, recompiles {base.recompiles} → {after.recompiles}"


def run_conditions(doc: FixDocument) -> str:
    """How every run of the document was made: its stdin, and its directory."""
    where = f"each in a scratch copy of {doc.cwd}" if doc.scratch_copies else f"in {doc.cwd} itself"
    return f"runs: stdin: {doc.stdin}; {where}"
