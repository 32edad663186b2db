"""The result of ``dynscope fix`` on the terminal: the trial table, the combined run, the change to paste."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from dynscope.analysis.fix_document import FIX_COLUMNS, FixDocument, fix_cells, run_conditions

_STYLE = {"fixed": "bold green", "improved": "green", "moved to eager": "yellow",
          "no change": "dim", "worse": "yellow", "failed": "bold red",
          "not run": "dim"}


def render_fix(doc: FixDocument, console: Console) -> None:
    base = doc.baseline.metrics
    console.print(f"[bold]dynscope fix[/] · {len(doc.problems)} problems · "
                  f"{doc.runs} runs in {doc.wall_s} s · baseline: {base and base.graph_breaks} breaks, "
                  f"{base and base.recompiles} recompiles, {base and base.errors} errors", soft_wrap=True)
    console.print(escape(run_conditions(doc)), style="dim", soft_wrap=True)
    if not doc.trials:
        console.print("No remedy to try: " + ("no problems found." if not doc.problems else
                                              "none of the problems has a remedy dynscope knows."))
    else:
        table = Table(show_lines=False, header_style="bold")
        for column in FIX_COLUMNS:
            table.add_column(column, overflow="fold")
        for row in doc.trials:
            cells = fix_cells(row)
            style = _STYLE.get(cells["verdict"], "")
            table.add_row(*[escape(cells[c]) for c in FIX_COLUMNS[:-1]],
                          f"[{style}]{escape(cells['verdict'])}[/]" if style else escape(cells["verdict"]))
        # In a log (no terminal) rich would squeeze the table into 80 columns: give it room.
        width = console.width
        if not console.is_terminal:
            console.width = max(width, 180)
        try:
            console.print(table)
        finally:
            console.width = width
        for row in doc.trials:
            if row.verdict in ("failed", "worse", "moved to eager") and row.why:
                console.print(f"  [{_STYLE[row.verdict]}]{escape(row.verdict)}[/] {escape(row.remedy)}: "
                              f"{escape(row.why)}", soft_wrap=True)
    combined = doc.combined
    if combined:
        after = combined.after
        style = _STYLE.get(combined.verdict, "")
        console.print(f"\n[bold]combined[/] ({escape(', '.join(combined.remedies))}): "
                      f"[{style}]{escape(combined.verdict)}[/] — breaks {base and base.graph_breaks} → "
                      f"{after and after.graph_breaks}, recompiles {base and base.recompiles} → {after and after.recompiles}"
                      f"{', outputs equal' if combined.correct else ''}", soft_wrap=True)
        for note in combined.conflicts:  # a rewrite left out: it changed lines an earlier one changed
            console.print(f"  [yellow]left out[/] {escape(note)}", soft_wrap=True)
        if combined.verdict in ("fixed", "improved"):
            console.print("[bold]The change to make[/] (verified together in one run):")
            patch = combined.patch
            console.print(Syntax(patch, "diff" if patch.startswith("--- ") else "python", theme="ansi_dark",
                                 background_color="default"))
    if not doc.files_unchanged:
        console.print("[bold red]warning:[/] a file of the program changed during the runs (not by dynscope's remedies)")
