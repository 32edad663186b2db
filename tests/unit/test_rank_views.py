"""Where ranks diverge, in every view: terminal summary, HTML report and TUI (torch-free,
on the recorded two-rank TORCH_TRACE logs)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dynscope.analysis.ranks import divergence
from dynscope.commands import main
from dynscope.model import Capture
from dynscope.trace_import import import_logs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tui_pilot import drive, text_of  # noqa: E402

RANKS = Path(__file__).resolve().parent.parent / "data" / "torch_trace" / "rank_divergence"


@pytest.fixture(scope="module")
def rank_paths(tmp_path_factory):
    out = tmp_path_factory.mktemp("views") / "run.dynscope"
    return [d.path for d in import_logs([str(RANKS)], str(out))]


def test_terminal_summary_of_several_ranks(rank_paths, capsys):
    assert main(["summary", *rank_paths]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "rank 0: 1 compile · 0 graph breaks · 0 recompiles" in out
    assert "rank 1: 4 compiles · 2 graph breaks · 2 recompiles" in out
    assert "Where the ranks diverge" in out
    assert "first: rank 1 alone breaks at" in out and "rank_divergence.py:18 (Failed to trace builtin operator)" in out
    assert "hang risk" in out


def test_summary_of_one_imported_rank_says_what_a_log_lacks(rank_paths, capsys):
    assert main(["summary", rank_paths[1]]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Imported from TORCH_TRACE:" in out and "not in a log: structural FX graphs" in out


def test_html_report_shows_the_divergence(rank_paths, tmp_path, capsys):
    out = tmp_path / "ranks.html"
    assert main(["report", *rank_paths, "-o", str(out)]) == 0
    html = out.read_text()
    table = html.split('id="rank-divergence"', 1)[1].split("</table>", 1)[0]
    first = table.split('<tr class="first-divergence">', 1)[1].split("</tr>", 1)[0]
    assert "<td>graph_break</td><td>1</td>" in first and "rank_divergence.py:18</code>" in first
    assert "rank 1 alone breaks at" in first


def test_tui_overview_shows_the_divergence(rank_paths):
    with Capture.open(rank_paths[0]) as c0, Capture.open(rank_paths[1]) as c1:
        found = divergence([c0, c1])
    seen = {}

    async def script(app, pilot):
        seen["text"] = text_of(app.query_one("#divergence"))

    async def facts(app, pilot):
        seen["facts"] = " ".join(text_of(app.query_one("#run-facts")).split())

    drive(Path(rank_paths[0]), script, size=(120, 40), divergence=found)
    drive(Path(rank_paths[1]), facts, size=(120, 40))
    assert "imported from TORCH_TRACE: 142 events" in seen["facts"]
    assert "not in a TORCH_TRACE log: fx_graphs, graph_breaks, guard_failures" in seen["facts"]
    text = " ".join(seen["text"].split())
    assert text.startswith("first: rank 1 alone breaks at") and "recompile: rank 1 alone recompiles step" in text
