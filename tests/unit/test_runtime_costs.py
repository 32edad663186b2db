"""Runtime costs from a profiled capture, without torch: a capture written by the real writer
with the events a profiled run records (compiles, a graph break, the profiler's snapshots and
an eager twin), and every number checked against the arithmetic it must follow."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from dynscope.analysis.run_view import run_view
from dynscope.analysis.summary import summary_document
from dynscope.errors import CaptureError
from dynscope.model import Capture
from dynscope.store.writer import CaptureWriter

FILE = "/src/model.py"
RESUME = "torch_dynamo_resume_in_forward_at_25"


def _compile(writer: CaptureWriter, cid: str, name: str, line: int, seconds: float) -> None:
    writer.append("dynamo_start", {"dynamo_start": {"stack": []}}, compile_id=cid, attempt=0)
    writer.append("compilation_metrics", {"compilation_metrics": {
        "compile_id": cid, "co_name": name, "co_filename": FILE, "co_firstlineno": line, "has_guarded_code": True,
        "entire_frame_compile_time_s": seconds, "graph_op_count": 3, "guard_latency_us": 100.0}}, compile_id=cid)


def _snapshot(*, gap_s=0.6, gap_calls=20, compiling=1, forward_calls=20, twin_calls=20) -> dict:
    return {
        "version": 1, "method": "perf_counter", "wall_s": 4.0,
        "graphs": [
            {"compile_id": "0/0", "file": FILE, "qualname": "Net.forward", "device": "cpu", "calls": forward_calls,
             "seconds": 0.2},
            {"compile_id": "1/0", "file": FILE, "qualname": f"Net.{RESUME}", "device": "cpu", "calls": 20,
             "seconds": 0.1},
            {"compile_id": "0/1", "file": FILE, "qualname": "Net.forward", "device": "cpu", "calls": 0,
             "seconds": 0.0},
        ],
        "breaks": [{"resume_compile_id": "1/0", "calls": gap_calls, "seconds": gap_s * (gap_calls - compiling) / gap_calls,
                    "unmeasured_calls": 0, "compiling_calls": compiling}],
        "entries": [{"name": "Net.forward", "file": FILE, "line": 10, "kind": "module", "device": "cpu",
                     "calls": 20, "seconds": 19 * 0.05, "compiling_calls": 1, "compiling_seconds": 2.05}],
    }


def profiled_capture(path, *, snapshot: dict | None = None, twin: dict | None = None, twin_exit: int = 0):
    writer = CaptureWriter(path)
    writer.set_meta(dynscope_version="0", torch_version="2.13.0", cwd="/src", command=["dynscope", "explain", "t.py"],
                    started=1.0, finished=5.0, exit_code=0)
    _compile(writer, "0/0", "forward", 10, 1.5)
    writer.append("dynscope:graph_break", {"gb_type": "Attempted to call function marked as skipped",
                                           "message": "skipped", "reason": "skipped", "traced_line": 25,
                                           "user_stack": [{"file": FILE, "line": 25, "function": "forward",
                                                           "code": "time.sleep(0.03)"}]},
                  compile_id="0/0", attempt=0)
    _compile(writer, "1/0", RESUME, 25, 0.3)
    _compile(writer, "0/1", "forward", 10, 0.4)
    writer.append("dynscope:guard_failure", {"function": "forward", "file": FILE, "line": 10,
                                             "failed_compile_id": "0/0", "reason": "L['n'] == 2", "guard": "L['n'] == 2",
                                             "actual": "3"})
    writer.append("artifact:recompile_reasons", {"artifact": {"name": "recompile_reasons"}}, "L['n'] == 2",
                  compile_id="0/1")
    if snapshot is not None:
        writer.append("dynscope:runtime", {"final": True}, json.dumps(snapshot))
    if twin is not None:
        writer.append("dynscope:runtime_eager", {"exit_code": twin_exit, "elapsed_s": 3.0}, json.dumps(twin))
    writer.close()
    return path


def twin(calls=20, per_call=0.15) -> dict:
    return {"entries": [{"name": "Net.forward", "file": FILE, "line": 10, "kind": "module", "device": "cpu",
                         "calls": calls, "seconds": calls * per_call, "compiling_calls": 0, "compiling_seconds": 0.0}]}


def test_a_break_costs_its_measured_gaps_and_counts_the_compiling_call_at_their_average(tmp_path):
    with Capture.open(str(profiled_capture(tmp_path / "p.dynscope", snapshot=_snapshot()))) as capture:
        [costed] = run_view(capture).costed_breaks
        costing = costed.costing
        assert costing.cost_s == pytest.approx(0.6)  # 19 measured gaps of 30 ms, and the compiling one
        assert costing.calls == 20
        assert costing.detail == ("costs 0.60 s over 20 calls, 30 ms a call: eager code from the graph before the "
                                  "break to graph 1/0 where it resumes")


def test_where_the_time_went_adds_up(tmp_path):
    with Capture.open(str(profiled_capture(tmp_path / "p.dynscope", snapshot=_snapshot()))) as capture:
        split = run_view(capture).time_split
        assert split.compiled_s == pytest.approx(0.3)
        assert split.eager_between_graphs_s == pytest.approx(0.6)
        assert split.guard_s == pytest.approx(40 * 100e-6)  # torch's 100 µs guard latency × 40 graph calls
        assert split.compile_s == pytest.approx(2.2)
        assert split.rest_s == pytest.approx(4.0 - 0.3 - 0.6 - 40e-4 - 2.2)


def test_problems_rank_by_cost_when_profiled_and_by_harm_without(tmp_path):
    with Capture.open(str(profiled_capture(tmp_path / "p.dynscope", snapshot=_snapshot(gap_s=0.01)))) as capture:
        ranked = run_view(capture).problems
        assert [p.kind for p in ranked] == ["recompile", "graph_break"]  # 0.4 s of recompiling > 10 ms of breaks
        assert ranked[0].cost_s == pytest.approx(0.4) and ranked[1].cost_s == pytest.approx(0.01)
        assert "version 0/0 served 100% of 20 calls, the recompiled versions 0" in ranked[0].cost_detail
    with Capture.open(str(profiled_capture(tmp_path / "plain.dynscope"))) as capture:
        ranked = run_view(capture).problems
        assert [p.kind for p in ranked] == ["graph_break", "recompile"]
        assert all(p.cost_s is None and p.cost_detail is None for p in ranked)


def test_vs_eager_speedup_and_break_even(tmp_path):
    path = profiled_capture(tmp_path / "p.dynscope", snapshot=_snapshot(), twin=twin())
    with Capture.open(str(path)) as capture:
        [entry] = run_view(capture).entry_runtimes
        v = entry.vs_eager
        assert v.comparable and v.speedup == pytest.approx(3.0)  # 150 ms eager vs 50 ms compiled a call
        assert v.compile_s == pytest.approx(2.0)  # the compiling call took 2.05 s where a call takes 50 ms
        assert v.break_even_calls == 20  # 2.0 s ÷ 0.1 s saved a call
        doc = summary_document(run_view(capture))["runtime"]
        assert doc["vs_eager"]["speedup"] == pytest.approx(3.0) and doc["vs_eager"]["break_even_calls"] == 20
        forward = next(f for f in doc["frames"] if f["compile_id"] == "0/0")
        assert forward["vs_eager"]["speedup"] == pytest.approx(3.0)
        assert next(f for f in doc["frames"] if f["compile_id"] == "1/0")["vs_eager"] is None


@pytest.mark.parametrize("twin_doc, exit_code, why", [
    (twin(calls=18), 0, "Net.forward ran 20 calls compiled and 18 in eager: the program did different work"),
    (twin(), 3, "the eager run exited with status 3"),
    ({"entries": []}, 0, "Net.forward never ran in the eager run"),
])
def test_runs_that_are_not_comparable_say_why(tmp_path, twin_doc, exit_code, why):
    path = profiled_capture(tmp_path / "p.dynscope", snapshot=_snapshot(), twin=twin_doc, twin_exit=exit_code)
    with Capture.open(str(path)) as capture:
        overall = run_view(capture).vs_eager
        assert not overall.comparable and overall.why_not == why and overall.speedup is None


def test_summary_json_fields_with_and_without_a_profile(tmp_path):
    with Capture.open(str(profiled_capture(tmp_path / "p.dynscope", snapshot=_snapshot()))) as capture:
        doc = summary_document(run_view(capture))
        assert doc["graph_breaks"][0]["cost_s"] == pytest.approx(0.6)
        assert doc["recompiles"][0]["cost_s"] == pytest.approx(0.4) and doc["recompiles"][0]["calls"] == 0
        assert doc["runtime"]["profiled"] and doc["runtime"]["method"] == "perf_counter"
        assert doc["runtime"]["vs_eager"] is None
    with Capture.open(str(profiled_capture(tmp_path / "plain.dynscope"))) as capture:
        doc = summary_document(run_view(capture))
        assert doc["runtime"] == {"profiled": False}
        assert doc["graph_breaks"][0]["cost_s"] is None
        assert doc["recompiles"][0]["cost_s"] is None and doc["recompiles"][0]["calls"] is None


def test_a_malformed_profile_is_one_line_not_a_traceback(tmp_path):
    path = profiled_capture(tmp_path / "p.dynscope", snapshot={"graphs": [{"compile_id": "0/0"}]})
    with Capture.open(str(path)) as capture:
        with pytest.raises(CaptureError, match="runtime profile in this capture is malformed"):
            _ = capture.runtime
    result = subprocess.run([sys.executable, "-m", "dynscope", "summary", str(path)], capture_output=True, text=True)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "malformed" in result.stderr


def test_a_cut_short_run_keeps_its_last_snapshot(tmp_path):
    path = profiled_capture(tmp_path / "p.dynscope", snapshot=_snapshot())
    with sqlite3.connect(path) as db:
        db.execute("UPDATE events SET metadata = '{\"final\": false}' WHERE name = 'dynscope:runtime'")
    with Capture.open(str(path)) as capture:
        assert capture.runtime is not None and not capture.runtime.complete
        assert run_view(capture).time_split.eager_between_graphs_s == pytest.approx(0.6)
