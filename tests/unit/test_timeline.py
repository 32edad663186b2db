"""The compile timeline in Chrome's trace event format (Perfetto / chrome://tracing), torch-free."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dynscope.analysis.timeline import phase_of, timeline_events
from dynscope.commands import main

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from chrome_trace import validate_trace  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "data" / "torch_trace"


def test_regions_left_open_or_closed_twice_still_nest():
    chromium = [
        {"name": "entire_frame_compile", "ph": "B", "ts": 1.0e6},
        {"name": "bytecode_tracing", "ph": "B", "ts": 1.1e6},
        {"name": "inductor_compile", "ph": "B", "ts": 1.2e6},
        {"name": "bytecode_tracing", "ph": "E", "ts": 1.3e6},   # closes inductor_compile too
        {"name": "never_opened", "ph": "E", "ts": 1.4e6},
        {"name": "backend_compile", "ph": "B", "ts": 1.5e6},    # the log ends inside it
    ]
    events = validate_trace({"traceEvents": timeline_events(3, "rank 3", chromium, [("0/0", "f", 1.0, 0.6)])})
    assert {e["pid"] for e in events} == {3}
    bars = [e for e in events if e["ph"] == "X"]
    assert bars == [{"name": "0/0 f", "cat": "compile", "ph": "X", "pid": 3, "tid": 1, "ts": 1.0e6, "dur": 0.6e6,
                     "args": {"compile_id": "0/0"}}]


def test_phases():
    assert [phase_of(n) for n in ("entire_frame_compile", "create_aot_dispatcher_function", "compile_fx_inner",
                                  "compile_file", "compile_fx.<locals>.bw_compiler")] == [
        "dynamo", "aot", "inductor", "codegen", "backward"]


def test_timeline_command_over_two_imported_ranks(tmp_path, capsys):
    assert main(["import", "-q", str(DATA / "rank_divergence"), "-o", str(tmp_path / "r.dynscope")]) == 0
    out = tmp_path / "trace.json"
    assert main(["timeline", str(tmp_path / "r.rank0.dynscope"), str(tmp_path / "r.rank1.dynscope"),
                 "-o", str(out)]) == 0
    events = validate_trace(json.loads(out.read_text()))
    names = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "process_name"}
    assert names == {(0, "rank 0"), (1, "rank 1")}
    # Rank 1 compiled four times (a break and a recompile), rank 0 once.
    bars = [(e["pid"], e["name"]) for e in events if e["ph"] == "X" and e["tid"] == 1]
    assert [b for b in bars if b[0] == 0] == [(0, "0/0 step")]
    assert len([b for b in bars if b[0] == 1]) == 4
    assert {e["cat"] for e in events if e["ph"] == "B"} >= {"dynamo"}
