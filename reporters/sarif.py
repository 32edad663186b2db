"""``check --format sarif``: the findings of a check as SARIF 2.1.0, the format code-scanning
dashboards read (GitHub code scanning, Azure DevOps, VS Code's SARIF viewer).

One result per finding of every failing check: each problem ``check`` reports as new over the
baseline, and each problem a limit counted when the run is over it (``--max-graph-breaks 0`` on
four breaks: four results, each at its line); ``properties.check`` says which ("baseline",
"max-graph-breaks"). A kind of problem is a rule: torch's graph-break id (``GB0059``) when the
capture has one, else a stable dynscope id per kind (``KIND_RULES``; a new kind of finding is one
more entry there and one more producer in ``dynscope.analysis.baseline.LIMIT_FINDINGS``).
``tool.driver.rules`` carries each rule's description, help (torch's hints) and documentation
link. Paths inside the run's directory are relative, against ``%SRCROOT%`` (the checkout a
dashboard maps them to); others are ``file://`` URIs. An allowed finding is a result with an
accepted suppression. Each limit is also a notification of the run (passed or failed), and so is
a warning (the runs compared used different entry scripts or backends).

The schema is tests/data/sarif-2.1.0.json; tests/unit/test_sarif.py validates against it.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dynscope._version import __version__
from dynscope.analysis.baseline import Finding
from dynscope.safe_text import doc_url, visible

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SOURCE_ROOT = "%SRCROOT%"

FindingKind = Literal["graph_break", "recompile", "error"]


@dataclass(frozen=True)
class KindRule:
    """The rule of findings torch gave no graph-break id for: one stable id per kind."""

    id: str
    name: str
    short: str
    full: str
    help: str


KIND_RULES: dict[str, KindRule] = {
    "graph_break": KindRule(
        "dynscope-graph-break", "GraphBreak", "A graph break",
        "Dynamo stopped tracing here and split the compiled graph (this torch gives the break type no id).",
        "Run `dynscope summary CAPTURE` for the break's cause and remedies, and `dynscope fix CAPTURE` to try "
        "them by re-runs."),
    "recompile": KindRule(
        "dynscope-recompile", "Recompile", "A recompile",
        "A guard of a cached compile failed on a later call, so torch.compile compiled the function again.",
        "Make the changing value dynamic (torch._dynamo.mark_dynamic for a size, a tensor for a Python number) "
        "or keep it constant; `dynscope fix CAPTURE` tries remedies and proves them by re-runs."),
    "error": KindRule(
        "dynscope-compile-error", "CompileError", "A compile error",
        "Compiling this frame failed in Dynamo or in the backend.",
        "Run `dynscope summary CAPTURE` for the error and where it started; `dynscope minify CAPTURE` "
        "shrinks a failing graph to a small repro."),
    "numerics": KindRule(
        "dynscope-numerics-suspect", "NumericsSuspect", "A numerics suspect",
        "The compiled graph's value at this op parts from eager's by more than eager's own error against a "
        "float64 reference (`dynscope numerics`).",
        "Run `dynscope numerics --try-remedies SCRIPT` to try the settings that bring compiled back to eager, and "
        "`dynscope minify CAPTURE --accuracy` for a small repro."),
}


@dataclass(frozen=True)
class SarifFinding:
    """One finding of one capture; ``allowed`` is the allow file's reason when it accepts it."""

    finding: Finding
    capture: str
    allowed: str | None = None


@dataclass(frozen=True)
class SarifNotice:
    """A limit checked on a whole capture (``--max-recompiles``): a notification, not a result."""

    text: str
    failed: bool
    level: str | None = None  # "warning" for a warning; else "error" when failed, "note" when passed


def rule_id(finding: Finding) -> str:
    if finding.kind == "graph_break" and finding.gb_id:
        return finding.gb_id
    return KIND_RULES[finding.kind].id


def sarif_text(findings: Sequence[SarifFinding], notices: Sequence[SarifNotice]) -> str:
    """The SARIF log as JSON text (ASCII: every capture string is escaped)."""
    return json.dumps(sarif_document(findings, notices), indent=2, ensure_ascii=True) + "\n"


def sarif_document(findings: Sequence[SarifFinding], notices: Sequence[SarifNotice]) -> dict[str, object]:
    rules: list[dict[str, object]] = []
    index: dict[str, int] = {}
    results = []
    for item in findings:
        rid = rule_id(item.finding)
        if rid not in index:
            index[rid] = len(rules)
            rules.append(_rule(rid, item.finding))
        results.append(_result(item, rid, index[rid]))
    invocation: dict[str, object] = {"executionSuccessful": True}
    if notices:
        invocation["toolExecutionNotifications"] = [
            {"level": n.level or ("error" if n.failed else "note"), "message": {"text": visible(n.text)}}
            for n in notices]
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {"name": "dynscope", "version": __version__, "rules": rules}},
            "originalUriBaseIds": {SOURCE_ROOT: {"description": {
                "text": "the directory the program was recorded in (its checkout)"}}},
            "invocations": [invocation],
            "results": results,
        }],
    }


def _rule(rid: str, finding: Finding) -> dict[str, object]:
    kind = KIND_RULES[finding.kind]
    if rid == kind.id:
        rule: dict[str, object] = {"id": rid, "name": kind.name, "shortDescription": {"text": kind.short},
                                   "fullDescription": {"text": kind.full}, "help": {"text": kind.help}}
    else:  # a torch graph-break id: torch's own words for the break type
        short = finding.gb_type or finding.message or "graph break"
        hints = "\n".join(f"- {h}" for h in finding.hints)
        rule = {"id": rid, "shortDescription": {"text": visible(short)},
                "fullDescription": {"text": visible(finding.explanation or short)},
                "help": {"text": visible(hints or kind.help)}}
    link = doc_url(finding.doc_link)  # only torch's documentation sites become a link
    if link:
        rule["helpUri"] = link
    rule["defaultConfiguration"] = {"level": "error"}
    return rule


def _result(item: SarifFinding, rid: str, rule_index: int) -> dict[str, object]:
    f = item.finding
    text = f"{f.title}: {f.message}"
    if f.hints:
        text += " Hint: " + " ".join(f.hints)
    result: dict[str, object] = {
        "ruleId": rid, "ruleIndex": rule_index, "level": "error", "message": {"text": visible(text)},
        "properties": {"capture": visible(item.capture), "kind": f.kind, "check": f.check},
    }
    location = _location(f.file, f.line)
    if location is not None:
        result["locations"] = [location]
    if item.allowed is not None:
        result["suppressions"] = [{"kind": "external", "status": "accepted",
                                   "justification": visible(item.allowed)}]
    return result


def _location(file: str | None, line: int | None) -> dict[str, object] | None:
    """A physical location; none for a frame with no file on disk (``<frozen runpy>``, ``<string>``)."""
    if not file or file.startswith("<"):
        return None
    artifact: dict[str, str]
    if os.path.isabs(file):
        artifact = {"uri": "file://" + urllib.parse.quote(file, safe="/")}
    else:
        artifact = {"uri": urllib.parse.quote(file.replace(os.sep, "/"), safe="/"), "uriBaseId": SOURCE_ROOT}
    physical: dict[str, object] = {"artifactLocation": artifact}
    if line is not None and line >= 1:
        physical["region"] = {"startLine": line}
    return {"physicalLocation": physical}
