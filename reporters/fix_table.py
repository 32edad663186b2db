"""The result of ``dynscope fix`` on the terminal: the trial table, the combined run, the change to paste."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dynscope.analysis.fix_document import FIX_COLUMNS, FixDocument, combined_numbers, fix_cells, run_conditions
from dynscope.safe_text import visible

_STYLE = {"fixed": "bold green", "improved": "green", "moved to eager": "yellow", "trade-off": "yellow",
          "no change": "dim", "worse": "yellow", "failed": "bold red", "not run": "dim"}


WIDE = 120  # columns the nine-column table needs to stay readable; narrower gets one block per remedy
_NOT_NUMBERS = ("problem", "remedy", "verdict")
_LINE_STYLE = {"+": "green", "-": "red", "@": "cyan"}


def render_fix(doc: FixDocument, console: Console) -> None:
    base = doc.baseline.metrics
    console.print(f"[bold]dynscope fix[/] · {len(doc.problems)} problems · "
                  f"{doc.runs} runs in {doc.wall_s} s · baseline: {base and base.graph_breaks} breaks, "
                  f"{base and base.recompiles} recompiles, {base and base.errors} errors", soft_wrap=True)
    console.print(escape(run_conditions(doc)), style="dim", soft_wrap=True)
    eager = doc.baseline.eager
    if eager is not None and eager.differs:  # said first: every verdict below reads differently
        console.print(f"[bold yellow]compiled ≠ eager:[/] {escape(eager.message)}", soft_wrap=True)
    if not doc.trials:
        console.print("No remedy to try: " + ("no problems found." if not doc.problems else
                                              "none of the problems has a remedy dynscope knows."))
    elif console.width >= WIDE:
        _table(doc, console)
    else:  # narrow (an 80-column terminal, a log): one block per remedy, each value wrapped in its own column
        _blocks(doc, console)
    for row in doc.trials:
        if row.verdict in ("failed", "worse", "trade-off", "moved to eager") and row.why:
            console.print(f"  [{_STYLE[row.verdict]}]{escape(row.verdict)}[/] {escape(row.remedy)}: "
                          f"{escape(row.why)}", soft_wrap=True)
    combined = doc.combined
    if combined:
        style = _STYLE.get(combined.verdict, "")
        # One remedy serving two problems was proven for each: it is named once.
        console.print(f"\n[bold]combined[/] ({escape(', '.join(dict.fromkeys(combined.remedies)))}): "
                      f"[{style}]{escape(combined.verdict)}[/] — {escape(combined_numbers(doc, combined))}"
                      f"{', outputs equal' if combined.correct else ''}")
        for note in combined.conflicts:  # a rewrite left out: it changed lines an earlier one changed
            console.print(f"  [yellow]left out[/] {escape(note)}", soft_wrap=True)
        if combined.verdict in ("fixed", "improved"):
            console.print("[bold]The change to make[/] (verified together in one run):")
            print_raw_patch(combined.patch, console)
    if not doc.files_unchanged:
        console.print("[bold red]warning:[/] a file of the program changed during the runs (not by dynscope's remedies)")


def _table(doc: FixDocument, console: Console) -> None:
    table = Table(show_lines=False, header_style="bold")
    for column in FIX_COLUMNS:
        table.add_column(column, overflow="fold")
    for row in doc.trials:
        cells = fix_cells(row)
        style = _STYLE.get(cells["verdict"], "")
        table.add_row(*[escape(cells[c]) for c in FIX_COLUMNS[:-1]],
                      f"[{style}]{escape(cells['verdict'])}[/]" if style else escape(cells["verdict"]))
    console.print(table)


def _blocks(doc: FixDocument, console: Console) -> None:
    """Each trial as a block: its verdict and remedy, then one labelled line per column, the
    values wrapped in a column of their own (so nothing is cut at any width)."""
    for i, row in enumerate(doc.trials, 1):
        cells = fix_cells(row)
        style = _STYLE.get(cells["verdict"], "")
        console.print(Text.assemble(f"{i}. ", (cells["verdict"], style or "bold"), " · ", cells["remedy"]))
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row("   problem", Text(cells["problem"]))
        numbers = [f"{column} {cells[column]}" for column in FIX_COLUMNS if column not in _NOT_NUMBERS and cells[column]]
        grid.add_row("   result", Text(" · ".join(numbers)))
        console.print(grid)


def print_raw_patch(patch: str, console: Console) -> None:
    """The change as its exact lines: never wrapped, cropped or re-indented by the console, so a
    copy from the terminal (or a pipe) is a patch `git apply` takes; coloured on a terminal only."""
    for line in patch.rstrip("\n").split("\n"):
        style = _LINE_STYLE.get(line[:1], "") if not line.startswith(("+++", "---")) else "bold"
        console.print(Text(visible(line), style=style), soft_wrap=True, highlight=False)
