"""No overview calls a run clean when numerics found a suspect or the compiled code ran slower than
eager: RunView.alerts and RunView.clean decide once, and every view (terminal summary, TUI, HTML,
Markdown, notebook) leads with the alerts. `check --max-numerics-suspects` / `--min-speedup` gate
on them. Torch-free: a recorded numerics capture and a hand-written profiled run with its eager twin."""

from __future__ import annotations

import asyncio
import html
import io
import json
from pathlib import Path

import pytest
from tui_pilot import settle

from dynscope.analysis.run_view import run_view
from dynscope.commands import main
from dynscope.model import Capture
from dynscope.reporters import ReportOptions
from dynscope.reporters.html import HtmlReporter
from dynscope.reporters.markdown import markdown_report
from dynscope.reporters.notebook import notebook_html
from dynscope.reporters.terminal import TerminalReporter
from dynscope.store.writer import CaptureWriter

ROOT = Path(__file__).resolve().parents[2]
SUSPECT = str(ROOT / "tests" / "data" / "numerics" / "relu_bug.dynscope")  # first suspect: relu, line 25
WITHIN = str(ROOT / "tests" / "data" / "numerics" / "bf16_within.dynscope")
FILE = "/src/model.py"


def profiled_run(path: Path, *, eager_per_call: float) -> str:
    """One clean compile of Net.forward, 20 calls at 50 ms compiled, and an eager twin at ``eager_per_call``."""
    writer = CaptureWriter(path)
    writer.set_meta(dynscope_version="0", torch_version="2.13.0", cwd="/src", command=["dynscope", "explain", "t.py"],
                    started=1.0, finished=5.0, exit_code=0)
    writer.append("dynamo_start", {"dynamo_start": {"stack": []}}, compile_id="0/0", attempt=0)
    writer.append("compilation_metrics", {"compilation_metrics": {
        "compile_id": "0/0", "co_name": "forward", "co_filename": FILE, "co_firstlineno": 10, "has_guarded_code": True,
        "entire_frame_compile_time_s": 1.5, "graph_op_count": 3}}, compile_id="0/0")
    entry = {"name": "Net.forward", "file": FILE, "line": 10, "kind": "module", "device": "cpu"}
    snapshot = {"version": 1, "method": "perf_counter", "wall_s": 4.0,
                "graphs": [{"compile_id": "0/0", "file": FILE, "qualname": "Net.forward", "device": "cpu",
                            "calls": 20, "seconds": 1.0}],
                "breaks": [],
                "entries": [{**entry, "calls": 20, "seconds": 19 * 0.05, "compiling_calls": 1,
                             "compiling_seconds": 2.05}]}
    twin = {"entries": [{**entry, "calls": 20, "seconds": 20 * eager_per_call, "compiling_calls": 0,
                         "compiling_seconds": 0.0}]}
    writer.append("dynscope:runtime", {"final": True}, json.dumps(snapshot))
    writer.append("dynscope:runtime_eager", {"exit_code": 0, "elapsed_s": 3.0}, json.dumps(twin))
    writer.close()
    return str(path)


@pytest.fixture
def slow(tmp_path) -> str:
    return profiled_run(tmp_path / "slow.dynscope", eager_per_call=0.036)  # compiled at 0.72x eager


@pytest.fixture
def fast(tmp_path) -> str:
    return profiled_run(tmp_path / "fast.dynscope", eager_per_call=0.15)  # 3x faster, pays back after 20 steps


def test_the_run_view_decides_once(slow, fast):
    with Capture.open(SUSPECT) as capture:
        view = run_view(capture)
        assert not view.problems and not view.clean
        [alert] = view.alerts
        assert alert.kind == "numerics_suspect" and "relu" in alert.title
        assert alert.file is not None and alert.file.endswith("numerics_relu_bug.py") and alert.line == 25
    with Capture.open(slow) as capture:
        view = run_view(capture)
        assert not view.problems and not view.clean
        [alert] = view.alerts
        assert alert.kind == "slower_than_eager" and "0.72×" in alert.title and "never pays back" in alert.detail
    for clean in (WITHIN, fast):
        with Capture.open(clean) as capture:
            view = run_view(capture)
            assert view.alerts == [] and view.clean == (not view.problems)


def _terminal(path: str) -> str:
    out = io.StringIO()
    with Capture.open(path) as capture:
        TerminalReporter.prepare([capture]).render(out)
    return out.getvalue()


def _markdown(path: str) -> str:
    with Capture.open(path) as capture:
        return markdown_report([capture])


def _html(path: str) -> str:
    out = io.StringIO()
    with Capture.open(path) as capture:
        HtmlReporter.prepare([capture], ReportOptions()).render(out)
    return html.unescape(out.getvalue())


def _notebook(path: str) -> str:
    with Capture.open(path) as capture:
        return html.unescape(notebook_html(capture))


def _tui(path: str) -> str:
    """The TUI's overview as the user sees it (its text, rendered)."""
    from textual.widgets import Static

    from dynscope.tui.app import DynscopeApp

    async def run() -> str:
        with Capture.open(path) as capture:
            app = DynscopeApp(capture, export_html=lambda out: None)
            async with app.run_test(size=(140, 50)) as pilot:
                await settle(app, pilot)
                return "\n".join(str(s.render()) for s in app.query("#overview Static").results(Static))

    return asyncio.run(run())


VIEWS = {"terminal": _terminal, "markdown": _markdown, "html": _html, "notebook": _notebook, "tui": _tui}
CLEAN_WORDS = ("No problems found", "No graph breaks, recompiles or compile errors")


@pytest.mark.parametrize("view", VIEWS)
def test_every_overview_leads_with_a_numerics_suspect(view):
    shown = VIEWS[view](SUSPECT)
    assert not any(words in shown for words in CLEAN_WORDS)
    lead = shown.index("Needs attention")
    suspect = shown.index("compiled and eager part ways at relu")
    assert lead < suspect and "numerics_relu_bug.py:25" in shown[lead:]
    if view in ("terminal", "markdown", "notebook"):  # ahead of the counts
        assert lead < shown.index("graph breaks")


@pytest.mark.parametrize("view", VIEWS)
def test_every_overview_leads_with_slower_than_eager(view, slow):
    shown = VIEWS[view](slow)
    assert not any(words in shown for words in CLEAN_WORDS)
    lead = shown.index("Needs attention")
    assert lead < shown.index("compiled ran slower than eager: 0.72× eager's speed") and "never pays back" in shown


@pytest.mark.parametrize("view", ["html", "notebook", "tui"])
def test_a_run_that_is_fast_and_clean_still_says_so(view, fast):
    shown = VIEWS[view](fast)
    assert "Needs attention" not in shown
    assert any(words in shown for words in CLEAN_WORDS)


def test_check_max_numerics_suspects_names_the_suspects_line(capsys, tmp_path):
    junit = tmp_path / "j.xml"
    assert main(["check", "--max-numerics-suspects", "0", "--junit", str(junit), SUSPECT]) == 1
    out = capsys.readouterr().out
    assert "2 numerics suspects (at most 0 allowed)" in out and out.count("FAIL") == 2
    assert "examples/numerics_relu_bug.py:25: numerics suspect relu (aten.relu.default)" in out
    assert "numerics_relu_bug.py:25: numerics suspect relu" in junit.read_text()
    assert main(["check", "--max-numerics-suspects", "2", SUSPECT]) == 0
    assert main(["check", "--max-numerics-suspects", "0", WITHIN]) == 0
    assert "0 numerics suspects (at most 0 allowed): ok" in capsys.readouterr().out


def test_check_min_speedup_uses_the_vs_eager_run(capsys, slow, fast):
    assert main(["check", "--min-speedup", "1", slow]) == 1
    out = capsys.readouterr().out
    assert "compiled ran at 0.72x eager's speed (at least 1x required); compiling never pays back: FAIL" in out
    assert main(["check", "--min-speedup", "0.7", slow]) == 0
    assert main(["check", "--min-speedup", "1.2x", fast]) == 0
    assert main(["check", "--min-speedup", "3.5", fast]) == 1


@pytest.mark.parametrize("argv, says", [
    (["check", "--min-speedup", "1", WITHIN], "has no eager run to compare with"),
    (["check", "--max-numerics-suspects", "0", "FAST"], "holds no numerics check"),
    (["check", "--min-speedup", "0", WITHIN], "must be more than 0"),
    (["check", "--min-speedup", "fast", WITHIN], "not a speed ratio"),
])
def test_a_gate_without_its_data_is_a_one_line_error(argv, says, capsys, fast):
    argv = [fast if a == "FAST" else a for a in argv]
    try:
        code = main(argv)
    except SystemExit as stopped:  # argparse refuses a malformed value itself
        code = stopped.code
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and says in err


def test_the_agents_problems_document_says_not_clean(slow):
    from dynscope.analysis.documents import problems_document

    with Capture.open(SUSPECT) as capture:
        doc = problems_document(run_view(capture))
        assert doc["problems"] == [] and doc["clean"] is False
        assert doc["alerts"][0]["kind"] == "numerics_suspect" and doc["alerts"][0]["line"] == 25
    with Capture.open(slow) as capture:
        assert problems_document(run_view(capture))["alerts"][0]["kind"] == "slower_than_eager"
    with Capture.open(WITHIN) as capture:
        doc = problems_document(run_view(capture))
        assert doc["alerts"] == [] and doc["clean"] is (doc["problems"] == [])


def test_numerics_suspects_over_the_limit_are_located_sarif_results(capsys):
    """Issue 41: every failing rule gives results with their place, numerics suspects included."""
    from test_sarif import validate

    assert main(["check", "--max-numerics-suspects", "0", "--format", "sarif", SUSPECT]) == 1
    log = json.loads(capsys.readouterr().out)
    validate(log)
    results = log["runs"][0]["results"]
    suspects = [r for r in results if r["ruleId"] == "dynscope-numerics-suspect"]
    assert len(suspects) == 2, results
    places = {(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
               r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in suspects}
    assert ("examples/numerics_relu_bug.py", 25) in places, places
    assert all(r["properties"]["check"] == "max-numerics-suspects" for r in suspects)
    assert main(["check", "--max-numerics-suspects", "0", "--format", "github", SUSPECT]) == 1
    assert "file=examples/numerics_relu_bug.py,line=25" in capsys.readouterr().out
