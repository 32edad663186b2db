"""The JSON report: the summary document plus every compile's stages and kernels, by reference.

"By reference" means names and sizes, not texts: a consumer fetches a stage's text with
``dynscope show CAPTURE --compile ID --stage KEY``. Schema: docs/summary-json.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

from dynscope.analysis.run_view import run_view
from dynscope.analysis.summary import kernel_json, stage_json, summary_document
from dynscope.model import Capture
from dynscope.reporters import ReportOptions
from dynscope.safe_text import json_text

SCHEMA = "dynscope.report/1"
SET_SCHEMA = "dynscope.report-set/1"


def report_document(capture: Capture) -> dict[str, Any]:
    document = summary_document(run_view(capture))
    document["schema"] = SCHEMA
    document["summary_schema"] = "dynscope.summary/1"
    for entry in document["compiles"]:
        compile_id = entry["compile_id"]
        entry["pipeline"] = [stage_json(s) for s in capture.stages(compile_id)]
        entry["kernels"] = [kernel_json(k) for k in capture.kernels(compile_id)]
    return document


def report_set(captures: list[Capture]) -> dict[str, Any]:
    """Several captures (one per rank) in one document: each is a full report."""
    return {"schema": SET_SCHEMA, "reports": [report_document(c) for c in captures]}


class JsonReporter:
    """The document is prepared once (one capture's report, or every rank's), then written."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    @classmethod
    def prepare(cls, captures: Sequence[Capture], options: ReportOptions = ReportOptions()) -> JsonReporter:
        document = report_document(captures[0]) if len(captures) == 1 else report_set(list(captures))
        if options.comparison is not None:
            from dynscope.analysis.compare import comparison_document

            document["comparison"] = comparison_document(options.comparison)
        return cls(document)

    def render(self, out: TextIO) -> None:
        out.write(json_text(self.document, indent=2) + "\n")
