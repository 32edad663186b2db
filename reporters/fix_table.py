"""The result of ``dynscope fix`` on the terminal: the trial table, the combined run, the change to paste."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from dynscope.analysis.fix_verdict import FIX_COLUMNS, fix_cells, run_conditions

_STYLE = {"fixed": "bold green", "improved": "green", "no change": "dim", "worse": "yellow", "failed": "bold red",
          "not run": "dim"}


def render_fix(doc: dict[str, Any], console: Console) -> None:
    base = doc.get("baseline") or {}
    console.print(f"[bold]dynscope fix[/] · {len(doc.get('problems', []))} problems · "
                  f"{doc.get('runs')} runs in {doc.get('wall_s')} s · baseline: {base.get('graph_breaks')} breaks, "
                  f"{base.get('recompiles')} recompiles, {base.get('errors')} errors", soft_wrap=True)
    console.print(escape(run_conditions(doc)), style="dim", soft_wrap=True)
    if not doc.get("trials"):
        console.print("No remedy to try: " + ("no problems found." if not doc.get("problems") else
                                              "none of the problems has a remedy dynscope knows."))
    else:
        table = Table(show_lines=False, header_style="bold")
        for column in FIX_COLUMNS:
            table.add_column(column, overflow="fold")
        for row in doc["trials"]:
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
        for row in doc["trials"]:
            if row.get("verdict") in ("failed", "worse") and row.get("why"):
                console.print(f"  [{_STYLE[row['verdict']]}]{escape(row['verdict'])}[/] {escape(row['remedy'])}: "
                              f"{escape(row['why'])}", soft_wrap=True)
    combined = doc.get("combined")
    if combined:
        after = combined.get("after") or {}
        style = _STYLE.get(combined.get("verdict", ""), "")
        console.print(f"\n[bold]combined[/] ({escape(', '.join(combined.get('remedies', [])))}): "
                      f"[{style}]{escape(str(combined.get('verdict')))}[/] — breaks {base.get('graph_breaks')} → "
                      f"{after.get('graph_breaks')}, recompiles {base.get('recompiles')} → {after.get('recompiles')}"
                      f"{', outputs equal' if combined.get('correct') else ''}", soft_wrap=True)
        if combined.get("verdict") in ("fixed", "improved"):
            console.print("[bold]The change to make[/] (verified together in one run):")
            patch = combined.get("patch", "")
            console.print(Syntax(patch, "diff" if patch.startswith("--- ") else "python", theme="ansi_dark",
                                 background_color="default"))
    if doc.get("files_unchanged") is False:
        console.print("[bold red]warning:[/] a file of the program changed during the runs (not by dynscope's remedies)")
