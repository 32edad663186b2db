"""What ``dynscope fix`` records in captures.

In a trial's capture (written by dynscope/fix/apply.py inside the run): the remedy features
of this torch, which remedies took effect, and each compiled region's outputs. In the program's
capture (``--from``, or the fix run's baseline): the verified fixes, one event each, so the
summary, the TUI and the reports show them beside the problem they fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dynscope.model.capture import Capture

ENV = "DYNSCOPE_FIX"  # the environment variable naming a trial's remedies (JSON)
FEATURES_EVENT = "dynscope:fix_features"
APPLIED_EVENT = "dynscope:fix_applied"
OUTPUT_EVENT = "dynscope:fix_output"
REGION_EVENT = "dynscope:fix_region"  # a callable given to torch.compile: {function, file}
RESULT_EVENT = "dynscope:fix_result"


@dataclass(frozen=True)
class FixResult:
    """A remedy ``dynscope fix`` proved on one problem of this run."""

    kind: str  # break | recompile | error
    file: str | None
    line: int | None
    function: str | None
    detail: str
    remedy: str  # the change in one line
    applies_as: str  # config | wrap | code
    patch: str
    verdict: str  # fixed | improved
    before: dict[str, Any]
    after: dict[str, Any]
    max_abs_diff: float | None

    @property
    def headline(self) -> str:
        return f"{self.verdict} by {self.remedy} (breaks {self.before.get('graph_breaks')} → " \
               f"{self.after.get('graph_breaks')}, recompiles {self.before.get('recompiles')} → " \
               f"{self.after.get('recompiles')}, outputs equal)"

    def matches(self, kind: str, file: str | None, line: int | None, function: str | None = None) -> bool:
        """Whether this fix is for a problem of the summary's kinds (graph_break, recompile, error)."""
        ours = {"graph_break": "break", "skipped_frame": "break", "recompile": "recompile",
                "recompile_limit": "recompile", "error": "error"}.get(kind, kind)
        if ours != self.kind or file != self.file:
            return False
        if self.kind == "recompile":
            return function == self.function
        return line == self.line


def fix_results(capture: Capture) -> list[FixResult]:
    out = []
    for e in capture.reader.events([RESULT_EVENT]):
        md = e.metadata
        problem = md.get("problem") or {}
        remedy = md.get("remedy") or {}
        out.append(FixResult(
            kind=str(problem.get("kind")), file=problem.get("file"), line=problem.get("line"),
            function=problem.get("function"), detail=str(problem.get("detail") or ""),
            remedy=str(remedy.get("title") or ""), applies_as=str(md.get("applies_as") or ""),
            patch=str(md.get("patch") or ""), verdict=str(md.get("verdict") or ""),
            before=dict(md.get("before") or {}), after=dict(md.get("after") or {}),
            max_abs_diff=md.get("max_abs_diff")))
    return out


def trial_outputs(capture: Capture) -> list[dict[str, Any]]:
    """Each compiled call's outputs: {region, call, leaves}."""
    reader = capture.reader
    out = []
    for e in reader.events([OUTPUT_EVENT]):
        leaves = reader.json_payload(e.payload_hash)
        out.append({"region": e.metadata.get("region"), "call": e.metadata.get("call"),
                    "leaves": leaves if isinstance(leaves, list) else []})
    return out


def trial_features(capture: Capture) -> dict[str, Any]:
    reader = capture.reader
    for e in reader.events([FEATURES_EVENT]):
        features = reader.json_payload(e.payload_hash)
        if isinstance(features, dict):
            return features
    return {}


def compiled_callables(capture: Capture) -> list[list[str]]:
    """[function, file] of each callable the program gave torch.compile (a module: its forward)."""
    return [[str(e.metadata.get("function")), str(e.metadata.get("file"))]
            for e in capture.reader.events([REGION_EVENT])]


def applied_actions(capture: Capture) -> set[int]:
    return {int(e.metadata["index"]) for e in capture.reader.events([APPLIED_EVENT]) if e.metadata.get("ok")}
