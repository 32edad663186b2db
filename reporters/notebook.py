"""A capture's summary as one HTML fragment for a notebook's output area (Jupyter, VS Code).

The HTML report's pieces (its problems, breaks, recompiles and errors, prepared by
dynscope.reporters.html) in a fragment that needs nothing else: inline styles only (a notebook's
sanitizer may drop <style> elements, and class names would meet the notebook's own CSS), no
script, no request (works offline), <details> to fold what is long. Every string from the
capture is escaped by jinja2's autoescape and made visible (dynscope.safe_text) as in the report.

Files a notebook cell was compiled from (``/tmp/ipykernel_1234/123.py``) are shown as the
notebook names them (``In[3]``) through ``file_labels``, given by the caller that knows them.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from dynscope.analysis.alerts import clean_line
from dynscope.analysis.names import location
from dynscope.analysis.run_view import run_view
from dynscope.analysis.source import SourceAccess
from dynscope.model import Capture
from dynscope.reporters import ReportOptions
from dynscope.reporters.html import ReportLimits, _GraphBudget, _RankView, _title, template_environment

_HERE = Path(__file__).parent

# One place for the fragment's looks; colours with alpha read on light and dark notebook themes.
STYLES = {
    "root": "font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; font-size: 13px; line-height: 1.45; "
            "border: 1px solid rgba(128,128,128,.35); border-radius: 6px; padding: 8px 12px; max-width: 1100px",
    "head": "font-weight: 600; margin-bottom: 4px",
    "dim": "opacity: .7",
    "counts": "margin: 4px 0 8px 0",
    "count": "display: inline-block; margin-right: 14px",
    "bad": "color: #e03131; font-weight: 600",
    "ok": "color: #2f9e44",
    "h": "font-size: 14px; font-weight: 600; margin: 10px 0 4px 0",
    "list": "margin: 2px 0 6px 0; padding-left: 22px",
    "item": "margin: 4px 0",
    "kind": "display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 8px; "
            "background: rgba(250,82,82,.18); margin-right: 4px",
    "cost": "display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 8px; "
            "background: rgba(250,176,5,.25); margin-right: 4px",
    "where": "font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; opacity: .8",
    "code": "font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; "
            "background: rgba(128,128,128,.15); padding: 1px 4px; border-radius: 3px; white-space: pre-wrap",
    "try": "margin-left: 2px; color: #1971c2",
    "fix": "margin-left: 2px; color: #2f9e44",
    "pre": "font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; white-space: pre-wrap; "
           "background: rgba(128,128,128,.1); padding: 6px; border-radius: 4px; margin: 4px 0; max-height: 320px; "
           "overflow: auto",
    "summary": "cursor: pointer",
    "foot": "margin-top: 8px; font-size: 12px; opacity: .75",
}


@dataclass(frozen=True)
class NotebookOptions:
    """``file_labels``: a file's name as the notebook shows it (``In[3]``), or None for files it did not run."""

    report: ReportOptions = ReportOptions()
    file_labels: Callable[[str], str | None] = lambda file: None


class NotebookReporter:
    """The summary of one capture as an HTML fragment (prepare, then render)."""

    def __init__(self, context: dict[str, Any]) -> None:
        self.context = context

    @classmethod
    def prepare(cls, captures: Sequence[Capture], options: ReportOptions = ReportOptions()) -> NotebookReporter:
        return cls.prepare_for_notebook(captures, NotebookOptions(report=options))

    @classmethod
    def prepare_for_notebook(cls, captures: Sequence[Capture], options: NotebookOptions) -> NotebookReporter:
        return cls({"title": _title(captures), "runs": [_run_context(c, options) for c in captures]})

    def render(self, out: TextIO) -> None:
        out.write(self.html())

    def html(self) -> str:
        env = template_environment()
        return env.get_template("notebook.html.j2").render(**self.context, S=STYLES)


def notebook_html(capture: Capture, options: NotebookOptions = NotebookOptions()) -> str:
    """The HTML fragment of one capture's summary."""
    return NotebookReporter.prepare_for_notebook([capture], options).html()


def _run_context(capture: Capture, options: NotebookOptions) -> dict[str, Any]:
    view = run_view(capture)
    sources = SourceAccess.for_run(capture.run, source_roots=options.report.source_roots,
                                   any_source=options.report.any_source)
    # The report's own pieces, without its stage payloads and drawings (no compile is detailed).
    rank = _RankView(0, capture, ReportLimits(detailed_compiles=0, recompile_diffs=20), _GraphBudget(0), sources)
    groups, recompiles = view.break_groups, view.recompiles
    cwd = capture.run.cwd

    def where(file: str | None, line: int | None, fallback: str) -> str:
        label = options.file_labels(file) if file else None
        if label is None:
            return fallback
        return f"{label}, line {line}" if line is not None else label

    problems = []
    for problem in view.problems[:10]:
        shown = rank._problem(problem, groups, recompiles)
        shown["where"] = where(problem.location.file, problem.location.line, shown["where"])
        problems.append(shown)
    breaks = []
    for i, group in enumerate(groups):
        shown = rank._break(i, group)
        shown["where"] = where(group.location.file, group.location.line, shown["where"])
        for frame, entry in zip(group.first.user_stack, shown["stack"]):
            entry["where"] = where(frame.file, frame.line, entry["where"])
        breaks.append(shown)
    shown_recompiles = []
    for i, recompile in enumerate(recompiles):
        shown = rank._recompile(i, recompile)
        shown["where"] = where(recompile.file, recompile.line, shown["where"])
        shown_recompiles.append(shown)
    errors = []
    for error in view.errors:
        errors.append({"compile_id": error.compile_id, "fail_type": error.fail_type, "reason": error.reason,
                       "where": where(error.file, error.line, location(error.file, error.line, cwd))})
    run = capture.run
    return {
        "capture": run.path,
        "capture_arg": shlex.quote(run.path),  # as the footer's commands take it
        "counts": view.totals,
        "profiled": view.profiled,
        "problems": problems,
        "alerts": [{"title": a.title, "detail": a.detail,
                    "where": where(a.file, a.line, location(a.file, a.line, cwd)) if a.file else None}
                   for a in view.alerts],
        "clean": view.clean,
        "clean_line": clean_line(view.alerts),
        "breaks": breaks,
        "recompiles": shown_recompiles,
        "errors": errors,
        "exception": None if capture.exception is None
        else f"{capture.exception.type}: {capture.exception.message.strip()}",
        "torch": run.torch_version,
        "incomplete": run.incomplete,
    }

