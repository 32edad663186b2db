"""Views of a capture for people and machines: terminal summary, HTML, Markdown, JSON.

Every reporter follows one protocol (memray's reporters do the same): ``prepare`` reads what
it shows from the captures' run views (dynscope.analysis.run_view) once, ``render`` writes
it to a text stream. Commands pick a reporter by format with ``prepare_report`` and never
reach into a reporter's internals; a reporter's heavy dependency (rich, jinja2) is imported
only when that format is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from dynscope.model import Capture


@dataclass(frozen=True)
class ReportOptions:
    any_source: bool = False  # show every source file the capture names (dynscope.analysis.source)
    source_roots: tuple[str, ...] = ()  # directories besides the current one whose source may be shown
    comparison: Any = None  # dynscope.analysis.compare.Comparison against an earlier run, shown first
    compile_time: bool = False  # add compile time by phase and costliest modules (summary/report --compile-time)


class Reporter(Protocol):
    @classmethod
    def prepare(cls, captures: Sequence[Capture], options: ReportOptions) -> Reporter:
        """Read everything the report shows (one capture, or one per rank)."""
        ...

    def render(self, out: TextIO) -> None:
        """Write the prepared report."""
        ...


# format -> (module, class), imported on demand
REPORTERS = {
    "terminal": ("dynscope.reporters.terminal", "TerminalReporter"),
    "html": ("dynscope.reporters.html", "HtmlReporter"),
    "md": ("dynscope.reporters.markdown", "MarkdownReporter"),
    "json": ("dynscope.reporters.json_report", "JsonReporter"),
}


def prepare_report(fmt: str, captures: Sequence[Capture], options: ReportOptions = ReportOptions()) -> Reporter:
    module, name = REPORTERS[fmt]
    reporter: type[Reporter] = getattr(importlib.import_module(module), name)
    return reporter.prepare(captures, options)
