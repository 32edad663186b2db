"""The guards and recompiles view: for each compile, why it was recompiled (the failing guard,
expected vs actual), what changed from the compile it replaced, and its guard list."""

from __future__ import annotations

import re
from collections.abc import Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from dynscope.analysis.diff import CompileDiff, diff_compiles
from dynscope.analysis.names import friendly_function, location, torch_frame_location
from dynscope.analysis.problems import advice_for
from dynscope.errors import DynscopeError
from dynscope.model import Capture, Compile, Guard, Recompile
from dynscope.tui.text import first_line, line, lines_of, plain


class GuardsPane(Horizontal):
    def __init__(self, capture: Capture, *, hide_volatile: bool = False) -> None:
        super().__init__()
        self.capture = capture
        self.hide_volatile = hide_volatile
        self.compiles: list[Compile] = []
        self.recompiles: dict[str, Recompile] = {}
        self.shown_compile: str | None = None  # whose details are on screen

    def compose(self) -> ComposeResult:
        # A table, not an option list: it renders only the rows on screen (captures have thousands of compiles).
        yield DataTable(id="guard-compiles", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="guard-detail-scroll"):
            yield Static(id="guard-detail")

    @property
    def table(self) -> DataTable:
        return self.query_one("#guard-compiles", DataTable)

    def on_mount(self) -> None:
        self.compiles = self.capture.compiles()
        self.recompiles = {r.compile_id: r for r in self.capture.recompiles()}
        table = self.table
        table.add_column("compile")
        table.add_column("function")
        table.add_column("guards", key="guards")
        table.add_column("recompiled because")
        for c in self.compiles:
            table.add_row(*compile_cells(c, self.recompiles.get(c.compile_id)), key=c.compile_id)
        if not self.compiles:
            self.query_one("#guard-detail", Static).update(plain("torch.compile compiled nothing in this run.", "dim"))
            return
        self._count_guards()
        first_recompile = next((i for i, c in enumerate(self.compiles) if c.compile_id in self.recompiles), 0)
        table.move_cursor(row=first_recompile)

    @work(thread=True, exclusive=True, group="guard-counts")
    def _count_guards(self) -> None:
        """One guard count per compile, the one the details and diffs show (the guard tree's
        checks): read in the background, since a capture can have thousands of compiles."""
        for c in self.compiles:
            if get_current_worker().is_cancelled:
                return
            try:
                count = self.capture.guard_count(c.compile_id)
            except DynscopeError:
                continue
            if count is not None and count != c.guard_count:
                self.app.call_from_thread(self.table.update_cell, c.compile_id, "guards", plain(str(count)))

    def focus_main(self) -> None:
        self.table.focus()

    def show(self, compile_id: str) -> None:
        self.table.move_cursor(row=self.table.get_row_index(compile_id))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        compile_id = event.row_key.value
        if compile_id is not None:
            self.query_one("#guard-detail", Static).update(plain(f"reading {compile_id}…", "dim"))
            self._load_details(compile_id)

    @work(thread=True, exclusive=True, group="guards")
    def _load_details(self, compile_id: str) -> None:
        try:
            text = compile_details(self.capture, self.capture.compile(compile_id), self.recompiles.get(compile_id),
                                   mask=mask_volatile if self.hide_volatile else None)
        except DynscopeError as e:
            text = plain(f"cannot read {compile_id}: {e}", "red")
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._display, compile_id, text)

    def _display(self, compile_id: str, text: Text) -> None:
        table = self.table
        if table.row_count and table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value == compile_id:
            self.shown_compile = compile_id
            self.query_one("#guard-detail", Static).update(text)
            self.query_one("#guard-detail-scroll", VerticalScroll).scroll_home(animate=False)


def compile_cells(c: Compile, recompile: Recompile | None) -> tuple[Text, Text, Text, Text]:
    reason = Text()
    if recompile is not None:
        failure = recompile.failures[0]
        reason = line(("↻ ", "magenta"), (first_line(failure.guard or failure.reason, 80), "magenta"))
    guards = "?" if c.guard_count is None else str(c.guard_count)
    return plain(c.compile_id, "bold"), plain(friendly_function(c.function)), plain(guards), reason


def compile_details(capture: Capture, c: Compile, recompile: Recompile | None,
                    mask: Callable[[str], str] | None = None) -> Text:
    cwd = capture.run.cwd
    rows = [line((c.compile_id, "bold"), " ", (friendly_function(c.function), "bold cyan"), "  ",
                 (location(c.file, c.line, cwd), "cyan"), (f"  {c.status}", "dim"))]
    if recompile is not None:
        rows += [plain(""), *recompile_rows(recompile, advice_for(capture, recompile))]
        previous = recompile.failures[0].failed_compile_id
        if previous:
            rows += [plain(""), *diff_rows(diff_compiles(capture, previous, c.compile_id))]
    guards = capture.guards(c.compile_id)
    rows += [plain(""), plain(f"Guards of {c.compile_id} ({len(guards)})", "bold")]
    if not guards:
        rows.append(plain("no guard list was recorded for this compile", "dim"))
    files = {other.file for other in capture.compiles() if other.file is not None}
    rows += [guard_row(g, mask, lambda text: torch_frame_location(text, files, cwd)) for g in guards]
    return lines_of(*rows)


def recompile_rows(r: Recompile, hint: str | None = None) -> list[Text]:
    rows = [plain("Why it was recompiled", "bold")]
    for i, f in enumerate(r.failures):
        cached = f"cached compile {f.failed_compile_id}" if f.failed_compile_id else "a cached compile"
        older = " (an older cache entry)" if i else ""
        rows.append(line("  ", (cached, "bold"), f" rejected the call{older}:"))
        rows.append(line(("    guard     ", "dim"), (f.guard or f.reason, "yellow")))
        if f.expected is not None or f.actual is not None:
            rows.append(line(("    expected  ", "dim"), (f.expected or "?", "green")))
            rows.append(line(("    actual    ", "dim"), (f.actual or "?", "red")))
        if f.user_code:
            rows.append(line(("    from      ", "dim"), f.user_code))
        if f.reason and f.reason != f.guard:
            rows.append(line(("    torch     ", "dim"), first_line(f.reason)))
    if hint:
        rows.append(plain(f"  try: {hint}", "green"))
    return rows


def diff_rows(d: CompileDiff) -> list[Text]:
    rows = [plain(f"What changed from {d.compile_a} to {d.compile_b}", "bold")]
    if d.graph is not None:
        graph = d.graph.summary_lines()[1:]
        rows += [plain(f"  graph: {row.strip()}") for row in graph] or [plain("  graph: unchanged")]
    rows.append(plain(f"  {d.guard_count_line}"))
    styles = {"~": "yellow", "+": "green", "-": "red"}
    for change in d.guard_changes:
        head = (f"  {change.mark} ", styles[change.mark])
        if change.mark == "~":
            rows.append(line(head, f"{change.subject}: ", (change.before or "", "red"), " → ", (change.after or "", "green")))
        else:
            rows.append(line(head, f"{change.subject}: ", (change.after or change.before or "", styles[change.mark])))
    if not d.guard_changes:
        rows.append(plain("  the guards are the same", "dim"))
    return rows


def guard_row(g: Guard, mask: Callable[[str], str] | None = None,
              where: Callable[[str], str] | None = None) -> Text:
    """``where`` rewrites torch's frame text of the guard's user line (see torch_frame_location)."""
    check = mask(g.check) if mask else g.check
    row = line(("  ", ""), (g.kind, "bold"), (f"  {g.source}" if g.source else "", "cyan"), "  ", check)
    if g.user_code or g.user_location:
        place = (where(g.user_location) if where else g.user_location) if g.user_location else ""
        row.append(plain(f"\n      from {g.user_code or ''}{'  ' if g.user_code else ''}{place}", "dim"))
    return row


_OBJECT_ID = re.compile(r"\b\d{9,}\b")
_GLOBAL_STATE = re.compile(r"(___check_global_state\(\) against ).*", re.DOTALL)


def mask_volatile(check: str) -> str:
    """A guard check without what differs between runs and machines: object ids, and the
    global-state snapshot (thread counts, flags). For snapshot tests only."""
    return _GLOBAL_STATE.sub(r"\1{…}", _OBJECT_ID.sub("<id>", check))
