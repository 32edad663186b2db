"""The result of one ``dynscope fix``: a tree of dataclasses, and its JSON (schema ``dynscope.fix/1``).

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

SCHEMA = "dynscope.fix/1"

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
class Baseline:
    metrics: Metrics | None
    exit_code: int | None
    capture: str
    wall_s: float | None

    def to_json(self) -> Json:
        return {**(self.metrics.as_json() if self.metrics else {}), "exit_code": self.exit_code,
                "capture": self.capture, "wall_s": self.wall_s}


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
    """One problem and one remedy tried for it."""

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
    rewrite: RewriteNote | None = None  # a source rewrite's rule, cause and file

    def to_json(self) -> Json:
        out: Json = {"problem": self.problem.to_json(), "remedy": self.remedy, "remedy_key": self.remedy_key,
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
    problems_left: tuple[str, ...] = ()  # keys of the targeted problems still present
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

FIX_COLUMNS = ("problem", "remedy", "breaks", "recompiles", "compile", "run", "outputs", "verdict")


def fix_cells(row: TrialRow) -> dict[str, str]:
    """One trial row as the table's cells (plain text), by column."""
    p = row.problem
    where = f" at {_base(p.file)}:{p.line}" if p.file else ""
    before = row.before.metrics
    after = row.after.metrics if row.after else None
    return {
        "problem": f"{p.detail}{where}",
        "remedy": row.remedy,
        "breaks": _arrow(_of(before, "graph_breaks"), _of(after, "graph_breaks")),
        "recompiles": _arrow(_of(before, "recompiles"), _of(after, "recompiles")),
        "compile": _arrow(_of(before, "compile_s"), _of(after, "compile_s"), " s"),
        "run": _arrow(_of(before, "run_s"), _of(after, "run_s"), " s"),
        "outputs": _outputs(row),
        "verdict": row.verdict,
    }


def _of(metrics: Metrics | None, column: Literal["graph_breaks", "recompiles", "compile_s", "run_s"]) -> int | float | None:
    """A metric as the document shows it (seconds rounded to the millisecond); None without metrics."""
    if metrics is None:
        return None
    match column:
        case "graph_breaks":
            return metrics.graph_breaks
        case "recompiles":
            return metrics.recompiles
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


def run_conditions(doc: FixDocument) -> str:
    """How every run of the document was made: its stdin, and its directory."""
    where = f"each in a scratch copy of {doc.cwd}" if doc.scratch_copies else f"in {doc.cwd} itself"
    return f"runs: stdin: {doc.stdin}; {where}"
