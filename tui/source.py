"""A user's source file, with one line marked: where a break happened or a kernel came from.

The capture stores paths, not files: the file is read from this machine's disk (relative
paths against the run's working directory), and if it can't be, the line torch recorded
is shown instead.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from dynscope.analysis.names import location
from dynscope.analysis.source import SourceAccess
from dynscope.tui.code_view import CodeView
from dynscope.tui.text import code_lines, line, plain

_WHOLE_FILE = 1_000_000  # lines of context: the whole file


class SourceScreen(Screen[None]):
    BINDINGS = [Binding("escape,q", "app.pop_screen", "Back")]

    def __init__(self, file: str | None, line_number: int | None, sources: SourceAccess, code: str | None = None) -> None:
        super().__init__()
        self.file = file
        self.line_number = line_number
        self.sources = sources
        self.cwd = sources.cwd
        self.code = code

    def compose(self) -> ComposeResult:
        yield Static(id="source-title")
        yield CodeView(id="source-code")
        yield Footer()

    def on_mount(self) -> None:
        where = location(self.file, self.line_number, self.cwd)
        title = self.query_one("#source-title", Static)
        view = self.query_one("#source-code", CodeView)
        excerpt = self.sources.excerpt(self.file, self.line_number, context=_WHOLE_FILE)
        withheld = self.sources.withheld(self.file)
        if excerpt is None:
            why = f"  {withheld}; torch recorded:" if withheld else "  cannot be read on this machine; torch recorded:"
            title.update(line((where, "bold cyan"), (why, "yellow")))
            view.show([plain(self.code or "(no source text was recorded)")], numbers=False)
        else:
            title.update(line((where, "bold cyan"), ("  escape: back", "dim")))
            lines = code_lines("\n".join(text for _, text in excerpt.lines), "python")
            view.show(lines, first_number=excerpt.lines[0][0], mark=excerpt.line)
        view.focus()
