"""The `/` search: reasons, FX node names and ops, kernel names, across the whole capture.

Run-wide records answer at once; then compiles are searched one by one in a worker thread,
results appearing as they come, so typing stays responsive on a capture of thousands of
compiles. Each new query cancels the search before it.
"""

from __future__ import annotations

import time
from functools import partial

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import DataTable, Input, Static
from textual.worker import get_current_worker

from dynscope.analysis.search import Hit, search_compile, search_run
from dynscope.errors import DynscopeError
from dynscope.model import Capture
from dynscope.tui.text import count, plain

MAX_HITS = 200  # beyond this a list is not read; refine the query instead
TYPING_PAUSE_S = 0.15
FLUSH_EVERY_S = 0.25
_KIND_STYLE = {"graph_break": ("break", "bold yellow"), "recompile": ("recompile", "bold magenta"),
               "error": ("error", "bold red"), "node": ("node", "bold cyan"), "kernel": ("kernel", "bold green")}


class SearchScreen(ModalScreen["Hit | None"]):
    BINDINGS = [Binding("escape", "dismiss_none", "Close"), Binding("down", "results", "Results", show=False)]

    def __init__(self, capture: Capture) -> None:
        super().__init__()
        self.capture = capture
        self.hits: list[Hit] = []
        self.done = True  # whether the latest search has finished
        self._pending: Timer | None = None  # the search waiting for a pause in typing

    def compose(self) -> ComposeResult:
        with Vertical(id="search-box"):
            yield Input(placeholder="search reasons, node names, ops, kernel names…", id="search-input")
            yield Static(plain("type to search; enter or ↓ to pick a result; escape to close", "dim"),
                         id="search-status")
            # A table renders only the rows on screen, so hundreds of results append cheaply.
            yield DataTable(id="search-results", cursor_type="row", show_header=False)

    @property
    def results(self) -> DataTable:
        return self.query_one("#search-results", DataTable)

    def on_mount(self) -> None:
        self.results.add_columns("kind", "what")

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.hits = []
        self.results.clear()
        if self._pending is not None:
            self._pending.stop()
        self.done = not event.value.strip()
        if not self.done:
            # Wait for a pause in typing: a search per keystroke would re-run for every prefix.
            self._pending = self.set_timer(TYPING_PAUSE_S, partial(self._search, event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_results()

    def action_results(self) -> None:
        if self.results.row_count:
            self.results.focus()

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.dismiss(self.hits[event.cursor_row])

    @work(thread=True, exclusive=True, group="search")
    def _search(self, query: str) -> None:
        worker = get_current_worker()
        try:
            compiles = self.capture.compiles()
            found = search_run(self.capture, query)
            self.app.call_from_thread(self._add, query, found, 0, not compiles)
            batch: list[Hit] = []
            flushed = time.monotonic()
            for i, c in enumerate(compiles, 1):
                if worker.is_cancelled or len(found) >= MAX_HITS:
                    break
                hits = search_compile(self.capture, c.compile_id, query)
                batch += hits
                found += hits
                # Hand results over in batches: each hand-over repaints the table.
                first_results = bool(batch) and len(found) == len(batch)
                if i == len(compiles) or first_results or time.monotonic() - flushed > FLUSH_EVERY_S:
                    self.app.call_from_thread(self._add, query, batch, i, i == len(compiles))
                    batch, flushed = [], time.monotonic()
            if batch:
                self.app.call_from_thread(self._add, query, batch, i, False)
        except DynscopeError as e:
            self.app.call_from_thread(self._status, plain(f"search stopped: {e}", "red"))

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "search")

    def _add(self, query: str, hits: list[Hit], searched: int, finished: bool) -> None:
        try:  # a result handed over while the screen closes finds its widgets already removed
            current, results = self.query_one("#search-input", Input).value, self.results
        except NoMatches:
            return
        if not self.is_attached or query != current:
            return  # the search was closed, or this is a result of an older query
        room = MAX_HITS - len(self.hits)
        self.hits += hits[:room]
        results.add_rows(hit_cells(hit) for hit in hits[:room])
        total = len(self.capture.compiles())
        self.done = finished or len(self.hits) >= MAX_HITS
        state = "done" if finished else f"stopped at the first {MAX_HITS}" if self.done else "searching…"
        progress = f"{count(len(self.hits), 'result')} · {searched} of {total} compiles searched · {state}"
        self._status(plain(progress, "dim"))

    def _status(self, text: Text) -> None:
        try:
            self.query_one("#search-status", Static).update(text)
        except NoMatches:  # the screen is closing
            pass


def hit_cells(hit: Hit) -> tuple[Text, Text]:
    kind, style = _KIND_STYLE.get(hit.kind, (hit.kind, "bold"))
    return plain(kind, style), plain(hit.label)
