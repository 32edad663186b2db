"""The event contract (dynscope/events.py): every kind named once, written and read through it,
and what the model cannot read counted and shown, never dropped silently. No torch: captures
are crafted with the real writer."""

from __future__ import annotations

import ast
import dataclasses
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from dynscope import events
from dynscope.analysis.run_view import run_view
from dynscope.analysis.summary import summary_document
from dynscope.model import Capture
from dynscope.reporters.terminal import render_summary
from dynscope.store.writer import CaptureWriter

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("record", [*events.DYNSCOPE_RECORDS, *events.TORCH_RECORDS[1:]],
                         ids=lambda r: r.KIND)
def test_every_record_reads_back_what_it_wrote(record):
    written = record()
    assert record.parse(json.loads(json.dumps(written.to_metadata()))) == written
    assert events.is_known(record.KIND)


def test_a_shape_is_checked_field_by_field():
    stack = [{"file": "m.py", "line": 3, "function": "f", "code": "x = 1"}]
    seen = events.GraphBreakSeen.parse({"gb_type": "t", "user_stack": stack, "traced_line": 3, "new_in_torch_3": 1})
    assert seen.user_stack == (events.BreakFrame("m.py", 3, "f", "x = 1"),)  # unknown fields are ignored
    for bad, why in (({"user_stack": "m.py:3"}, "user_stack: expected tuple, got str"),
                     ({"user_stack": [{"line": "3"}]}, "user_stack[0].line: expected int | None, got str"),
                     ({"skip_frame": 1}, "skip_frame: expected bool, got int"),
                     ([1, 2], "its data is not an object")):
        with pytest.raises(events.NotUnderstood) as caught:
            events.GraphBreakSeen.parse(bad)
        assert (caught.value.kind, caught.value.why) == ("dynscope:graph_break", why)
    with pytest.raises(events.NotUnderstood, match="expected \\[path, index\\]"):
        events.InternedString.parse({"str": ["m.py"]})
    assert events.recompile_reasons('["a", "b"]') == ["a", "b"] and events.recompile_reasons("n == 2") == ["n == 2"]


def test_dynscope_event_kinds_are_named_only_in_the_contract():
    """No module spells a "dynscope:<kind>" name itself: writers and readers use the records."""
    spelled = []
    for folder in ("dynscope", "tui", "reporters", "minifier"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == ROOT / "dynscope" / "events.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                        node.value.startswith("dynscope:") and node.value[9:10].isalpha():
                    spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert spelled == []


def _crafted(path: Path) -> Path:
    """A capture with one compile and a graph break that read fine, and three events that do not:
    a graph break whose stack is a string, a guard failure whose line is text, and a kind nobody knows."""
    w = CaptureWriter(path)
    w.set_meta(dynscope_version="0", torch_version="2.13.0", cwd=str(path.parent), command=["prog.py"],
               started=1.0, finished=2.0, exit_code=0, probes={"graph_breaks": True})
    events.write(w, events.RunStart(argv=("prog.py",)))
    w.append("str", {"str": ["/m/prog.py", 0]})
    w.append("dynamo_start", events.DynamoStart(stack=(events.TraceFrame(3, "f", 0),)).to_metadata(),
             compile_id="0/0", attempt=0)
    events.write(w, events.GraphBreakSeen(gb_type="Unsupported call", message="Unsupported call",
                                          user_stack=(events.BreakFrame("/m/prog.py", 4, "f", "print(x)"),)),
                 compile_id="0/0", attempt=0)
    w.append(events.GraphBreakSeen.KIND, {"gb_type": "Broken", "user_stack": "prog.py:9"}, compile_id="0/0")
    w.append(events.GuardFailureSeen.KIND, {"reason": "0/0: n == 2", "line": "four"})
    w.append("compilation_metrics", events.CompilationMetrics(
        co_name="f", co_filename="/m/prog.py", co_firstlineno=3, has_guarded_code=True, graph_op_count=2,
        entire_frame_compile_time_s=0.5, restart_reasons=("graph break",)).to_metadata(), compile_id="0/0")
    w.append("from_the_future", {"from_the_future": {}})
    events.write(w, events.RunEnd(exit_code=0, elapsed_s=1.0))
    w.close()
    return path


def test_what_the_model_cannot_read_is_counted_and_shown(tmp_path):
    with Capture.open(str(_crafted(tmp_path / "run.dynscope"))) as capture:
        [c] = capture.compiles()
        assert (c.function, c.line, c.attempts, c.status, c.times.total) == ("f", 3, 2, "ok", 0.5)
        assert [b.headline for b in capture.graph_breaks()] == ["Unsupported call"]
        assert capture.graph_breaks()[0].location.line == 4
        assert capture.not_understood() == {
            "dynscope:graph_break": (1, "user_stack: expected tuple, got str"),
            "dynscope:guard_failure": (1, "line: expected int | None, got str"),
            "from_the_future": (1, "an event kind dynscope does not know"),
        }
        document = summary_document(run_view(capture))
        assert [(n["kind"], n["count"]) for n in document["not_understood"]] == [
            ("dynscope:graph_break", 1), ("dynscope:guard_failure", 1), ("from_the_future", 1)]
        out = io.StringIO()
        render_summary(capture, Console(file=out, width=300, color_system=None))
    assert ("3 events not understood: dynscope:graph_break ×1 (user_stack: expected tuple, got str), "
            "dynscope:guard_failure ×1 (line: expected int | None, got str), "
            "from_the_future ×1 (an event kind dynscope does not know)") in out.getvalue()


def test_a_clean_capture_says_nothing_about_it(tmp_path):
    path = _crafted(tmp_path / "run.dynscope")
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM events WHERE name IN ('from_the_future') OR metadata LIKE '%prog.py:9%' "
                   "OR metadata LIKE '%four%'")
    with Capture.open(str(path)) as capture:
        assert capture.not_understood() == {}
        assert summary_document(run_view(capture))["not_understood"] == []
        out = io.StringIO()
        render_summary(capture, Console(file=out, width=300, color_system=None))
    assert "not understood" not in out.getvalue()


def test_the_minify_result_has_one_form():
    """The capture event, result.json and the summary JSON all use MinifyResult's field names."""
    names = {f.name for f in dataclasses.fields(events.MinifyResult)}
    assert {"culprit", "verify", "passed_backends", "checks_run"} <= names
    assert set(events.MinifyResult(culprit="x").to_json()) == names


def test_a_bad_meta_field_costs_only_itself(tmp_path):
    path = _crafted(tmp_path / "run.dynscope")
    w = CaptureWriter.reopen(path)
    w.set_meta(pid="four", probe_errors=2)
    w.close()
    with Capture.open(str(path)) as capture:
        run = capture.run
        assert (run.pid, run.probe_errors, run.command, run.exit_code) == (None, 2, ["prog.py"], 0)
        assert capture.not_understood()["meta"] == (1, "pid: expected int | None, got str")
