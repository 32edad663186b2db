"""The TUI's numerics view, driven by key presses (Textual's Pilot) on captures checked by
`dynscope numerics` (written through the contract: tests/unit/numerics_captures.py): the error along
the graph as rows, the first suspect selected with its kernel code, its source line one key away."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import REPO
from textual.widgets import OptionList, Static, TabbedContent
from tui_pilot import drive, settle, text_of

from dynscope.tui.app import DynscopeApp
from dynscope.tui.code_view import CodeView
from dynscope.tui.help import HelpScreen
from dynscope.tui.kernels import KernelsPane
from dynscope.tui.numerics import NumericsPane
from dynscope.tui.source import SourceScreen

sys.path.insert(0, str(REPO / "tests" / "unit"))
import numerics_captures  # noqa: E402

SOURCE = numerics_captures.SOURCE_FILE  # the relu example's file, as the capture names it


async def press(app: DynscopeApp, pilot, *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
        await settle(app, pilot)


def _relu_bug(tmp_path: Path) -> Path:
    # The program's source beside the capture (its recorded cwd), so the source line can be shown.
    source = tmp_path / numerics_captures.SOURCE_FILE
    source.parent.mkdir(parents=True)
    source.write_text("".join(f"# line {i}\n" for i in range(1, 17)) + "        return torch.relu(x)\n")
    return numerics_captures.relu_bug(tmp_path / "relu_bug.dynscope")


def test_the_numerics_view_opens_on_the_first_suspect_with_its_kernel_and_source(tmp_path):
    async def script(app, pilot):
        await press(app, pilot, "6")
        assert app.query_one("#tabs", TabbedContent).active == "numerics"
        pane = app.query_one(NumericsPane)
        rows = pane.query_one("#numerics-nodes", OptionList)
        # one title row, then the 12 nodes in order; the relu highlighted, marked first suspect and grown
        assert rows.option_count == 13 and rows.highlighted == 6
        relu_row = str(rows.get_option_at_index(6).prompt)
        assert relu_row.split()[:2] == ["5", "●▲"] and "relu" in relu_row and "aten.relu.default" in relu_row
        assert "█" in relu_row
        info = text_of(pane.query_one("#numerics-info", Static))
        assert "first suspect" in info and "kernel cpp_fused_relu_0" in info
        assert f"{SOURCE}:17" in info
        assert pane.query_one("#numerics-code", CodeView).text == numerics_captures.RELU_KERNEL_CODE
        # enter: the suspect's source line
        await press(app, pilot, "enter")
        assert isinstance(app.screen, SourceScreen)
        source = app.screen.query_one(CodeView)
        assert source.marked_line == 17 and source.line_text(17).strip() == "return torch.relu(x)"
        await press(app, pilot, "escape")
        # k: the same kernel in the kernels view
        await press(app, pilot, "k")
        assert app.query_one("#tabs", TabbedContent).active == "kernels"
        kernels = app.query_one(KernelsPane)
        assert kernels.kernel is not None and kernels.kernel.name == "cpp_fused_relu_0"
        # moving to another node shows its marks; a nondeterministic-free capture marks none so
        await press(app, pilot, "6", "down")
        assert "node 6" in text_of(pane.query_one("#numerics-info", Static))
        await press(app, pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = " ".join(text_of(s) for s in app.screen.query(Static))
        assert "numerics: the error along each graph" in shown and "the node's kernel in the kernels view" in shown

    drive(_relu_bug(tmp_path), script, size=(160, 40), source_roots=(str(tmp_path),))


def test_a_nondeterministic_node_is_marked_apart_and_a_run_not_checked_has_no_numerics_tab(tmp_path, make_capture):
    async def nondeterministic(app, pilot):
        await press(app, pilot, "6")
        pane = app.query_one(NumericsPane)
        rows = pane.query_one("#numerics-nodes", OptionList)
        assert rows.highlighted == 1  # no suspect: the first node
        scatter = str(rows.get_option_at_index(4).prompt)
        assert "◆" in scatter and "scatter_add" in scatter and "●" not in scatter
        others = [str(rows.get_option_at_index(i).prompt) for i in range(1, 13) if i != 4]
        assert not any("◆" in row or "!" in row for row in others)
        await press(app, pilot, "down", "down", "down")
        assert "nondeterministic: changed from one compiled run to the next" in text_of(
            pane.query_one("#numerics-info", Static))

    drive(numerics_captures.nondeterministic(tmp_path / "nd.dynscope"), nondeterministic, size=(160, 40))

    async def not_checked(app, pilot):
        await press(app, pilot, "6")  # no such view: nothing happens
        assert app.query_one("#tabs", TabbedContent).active == "overview"
        assert not app.query("TabPane#numerics")
        await press(app, pilot, "question_mark")
        assert "numerics" not in " ".join(text_of(s) for s in app.screen.query(Static))

    drive(make_capture("recompiles.py", "--backend", "eager"), not_checked)
