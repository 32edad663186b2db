"""Compile time by phase (dynscope.model.compile_phases, dynscope.analysis.compile_time), torch-free:
hand-made region streams for the rules, the recorded captures of every torch version for the
5% agreement with torch's own measured totals."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from dynscope.analysis.compile_time import compile_times, frame_compile_times, measured_seconds
from dynscope.analysis.timeline import ATTRIBUTED_TRACK, timeline_events
from dynscope.commands import main
from dynscope.model import Capture
from dynscope.model.compile_phases import PHASES, compile_phases, phase_of_region

CAPTURES = Path(__file__).resolve().parents[2] / "tests" / "data" / "captures"
RECORDED = sorted(CAPTURES.glob("*/*.dynscope"))


def region(name: str, ph: str, ts_s: float, cid: str | None = "0/0") -> dict[str, object]:
    return {"name": name, "ph": ph, "ts": ts_s * 1e6, "args": {} if cid is None else {"compile_id": cid}}


def test_nested_regions_count_once_and_the_rest_is_other():
    events = [
        region("dynamo", "B", 0.0),
        region("entire_frame_compile", "B", 1.0),
        region("bytecode_tracing", "B", 1.0),
        region("bytecode_tracing", "E", 3.0),           # dynamo 2 s
        region("backend_compile", "B", 3.5),            # 0.5 s between: other
        region("create_aot_dispatcher_function", "B", 4.0),  # 0.5 s in backend_compile alone: other
        region("inductor_compile", "B", 5.0),           # aot 1 s
        region("GraphLowering.run", "B", 5.5),          # inductor 0.5 s
        region("GraphLowering.run", "E", 7.5),          # lowering 2 s
        region("async_compile.wait", "B", 8.0),         # inductor 0.5 s
        region("compile_file", "B", 8.2, cid=None),     # a worker's region: covered by the wait
        region("compile_file", "E", 9.0, cid=None),
        region("async_compile.wait", "E", 10.0),        # compile 2 s
        region("inductor_compile", "E", 10.0),
        region("create_aot_dispatcher_function", "E", 10.5),  # aot 0.5 s
        region("backend_compile", "E", 10.5),
        region("build_guards", "B", 11.0),               # other 0.5 s
        region("build_guards", "E", 11.25),              # guards 0.25 s
        region("entire_frame_compile", "E", 11.5),       # other 0.25 s
        region("dynamo", "E", 12.0),                     # outside the compile's bounds: not counted
        region("entire_backward_compile", "B", 20.0),
        region("GraphLowering.run", "B", 20.5),          # inside the backward: backward
        region("GraphLowering.run", "E", 21.0),
        region("entire_backward_compile", "E", 21.5),    # backward 1.5 s
        region("entire_frame_compile", "B", 30.0, cid="1/0"),
        region("entire_frame_compile", "E", 30.5, cid="1/0"),
    ]
    phases = compile_phases(events)
    assert set(phases) == {"0/0", "1/0"}
    first = phases["0/0"]
    assert dict(first.seconds) == pytest.approx({"dynamo": 2.0, "guards": 0.25, "aot": 1.5, "inductor": 1.0,
                                                 "lowering": 2.0, "compile": 2.0, "backward": 1.5, "other": 1.75})
    assert [p for p, _ in first.seconds] == [p for p in PHASES if p in dict(first.seconds)]
    assert first.traced_s == pytest.approx(10.5 + 1.5)
    # the spans tile the compile without overlapping
    assert all(a[2] <= b[1] for a, b in zip(first.spans, first.spans[1:]))
    assert sum(end - start for _, start, end in first.spans) / 1e6 == pytest.approx(first.traced_s)
    # older torch times no bytecode tracing region: the compile's own time is Dynamo's
    assert dict(phases["1/0"].seconds) == pytest.approx({"dynamo": 0.5})


def test_a_region_left_open_is_closed_by_its_parent():
    events = [region("entire_frame_compile", "B", 0.0), region("bytecode_tracing", "B", 0.0),
              region("bytecode_tracing", "E", 0.5), region("GraphLowering.run", "B", 1.0),
              region("Scheduler.__init__", "B", 2.0), region("GraphLowering.run", "E", 3.0),
              region("entire_frame_compile", "E", 4.0)]
    assert dict(compile_phases(events)["0/0"].seconds) == pytest.approx(
        {"dynamo": 0.5, "lowering": 1.0, "scheduling": 1.0, "other": 1.5})


def test_region_names():
    assert [phase_of_region(n) for n in (
        "bytecode_tracing", "build_guards", "aot_trace_joint_graph", "min_cut_rematerialization_partition",
        "pass.post_grad_passes.stable_sort", "_recursive_post_grad_passes", "GraphLowering.run", "Scheduler.fused_nodes",
        "Scheduler.codegen", "PythonWrapperCodegen.generate", "compile_file", "async_compile.wait",
        "CachingAutotuner.benchmark_all_configs", "backend_compile", "entire_frame_compile")] == [
        "dynamo", "guards", "aot", "aot", None, "inductor", "lowering", "scheduling", "codegen", "codegen",
        "compile", "compile", "autotune", None, None]


@pytest.mark.parametrize("path", RECORDED, ids=[f"{p.parent.name}/{p.stem}" for p in RECORDED])
def test_phases_sum_to_torchs_measured_total_within_5_percent(path):
    with Capture.open(str(path)) as capture:
        compiles = capture.compiles()
        times = compile_times(capture, compiles)
        assert [t.compile_id for t in times] == [c.compile_id for c in compiles if c.times.total]
        for t, c in zip(times, compiles):
            assert t.phase_sum_s == pytest.approx(measured_seconds(c), rel=0.05), t.compile_id
            assert sum(s for _, s in t.phases.seconds) == pytest.approx(t.phase_sum_s)
        frames = frame_compile_times(times, compiles)
        assert sum(f.total_s for f in frames) == pytest.approx(sum(t.phase_sum_s for t in times))


@pytest.mark.parametrize("version", sorted({p.parent.name for p in RECORDED}))
def test_inductor_compile_names_its_phases_and_modules(version):
    with Capture.open(str(CAPTURES / version / "conv_net_inductor.dynscope")) as capture:
        [t] = compile_times(capture, capture.compiles())
    phases = dict(t.phases.seconds)
    assert {"aot", "lowering", "scheduling", "codegen", "compile", "backward"} <= set(phases)
    # conv_net's forward: a conv, a batch norm and a linear head (examples/conv_net.py)
    assert {m.module for m in t.modules} == {"self.conv", "self.bn", "self.head"}
    inductor_s = sum(phases.get(p, 0.0) for p in ("inductor", "lowering", "scheduling", "codegen", "compile",
                                                  "autotune", "backward"))
    assert 0 < sum(m.seconds for m in t.modules) <= inductor_s


def test_summary_compile_time_json_and_text():
    path = str(CAPTURES / "2.13.0+cpu" / "recompiles_eager.dynscope")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["summary", "--json", "--compile-time", path]) == 0
    doc = json.loads(out.getvalue())["compile_phases"]
    assert [c["compile_id"] for c in doc["compiles"]] == ["0/0", "0/1", "0/2", "0/3", "1/0", "1/1"]
    for c in doc["compiles"]:
        assert sum(c["phases"].values()) == pytest.approx(c["measured_s"], rel=0.05)
    assert len(doc["frames"]) == 2 and doc["frames"][0]["total_s"] >= doc["frames"][1]["total_s"]
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["summary", "--compile-time", path]) == 0
    assert "Compile time by phase" in out.getvalue() and "Dynamo tracing" in out.getvalue()


def test_timeline_track_of_attributed_phases():
    with Capture.open(str(CAPTURES / "2.13.0+cpu" / "conv_net_inductor.dynscope")) as capture:
        c = capture.compiles()[0]
        events = timeline_events(0, "capture 0", capture.chromium_events(), [(c.compile_id, c.function, c.started, 1.0)],
                                 capture.compile_phases().values())
    slices = [e for e in events if e.get("tid") == ATTRIBUTED_TRACK and e["ph"] == "X"]
    assert sum(e["dur"] for e in slices) / 1e6 == pytest.approx(measured_seconds(c), rel=0.05)
    assert {e["cat"] for e in slices} >= {"aot", "lowering", "compile", "backward"}


def test_html_report_draws_the_phases_flame_without_script(tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", str(CAPTURES / "2.13.0+cpu" / "conv_net_inductor.dynscope"), "-o", str(out)]) == 0
    html = out.read_text()
    start = html.index('<div class="flame">')
    flame = html[start:html.index("<h3>Compile timeline", start)]
    assert "<script" not in flame
    assert "C++/Triton compilation: " in flame and "backward compile: " in flame
    assert "self.bn: ~" in flame and "of Inductor time" in flame
    assert flame.count("<rect") >= 1 + 8 + 3  # the frame, its phases, its modules


def test_markdown_report_adds_compile_time_only_when_asked():
    path = str(CAPTURES / "2.13.0+cpu" / "conv_net_inductor.dynscope")
    plain, asked = io.StringIO(), io.StringIO()
    with redirect_stdout(plain):
        assert main(["report", "--format", "md", path]) == 0
    with redirect_stdout(asked):
        assert main(["report", "--format", "md", "--compile-time", path]) == 0
    assert "Compile time by phase" not in plain.getvalue()
    section = asked.getvalue().split("#### Compile time by phase", 1)[1]
    assert "Inductor lowering" in section and "`self.bn`" in section


def test_tui_stage_title_names_the_phases_unless_volatile_is_hidden():
    from dynscope.tui.stage_stepper import StageRequest, build_view

    with Capture.open(str(CAPTURES / "2.13.0+cpu" / "conv_net_inductor.dynscope")) as capture:
        shown = build_view(capture, StageRequest("0/0"), compile_time=True).title.plain
        hidden = build_view(capture, StageRequest("0/0")).title.plain
    assert "compile time 15.25 s: Dynamo tracing" in shown and "C++/Triton compilation" in shown
    assert "compile time" not in hidden
