"""Issue 15 with live runs: a tampered graph can't make minify call anything outside its
allow-list, two runs can't write one capture, and a full disk ends a run cleanly."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
from conftest import REPO, explain_holding_its_capture, run_dynscope

PROGRAMS = REPO / "tests" / "programs"
sys.path.insert(0, str(REPO / "tests" / "unit"))
from hostile import add_payload  # noqa: E402


@pytest.mark.parametrize("target, args", [
    ("os.system", ["touch {marker}"]),
    ("builtins.eval", ["__import__('os').system('touch {marker}')"]),
    ("subprocess.run", [["touch", "{marker}"]]),
])
def test_minify_from_a_tampered_graph_never_calls_outside_its_allow_list(make_capture, tmp_path, target, args):
    from dynscope.model import Capture

    capture = tmp_path / "tampered.dynscope"
    shutil.copy(make_capture("graph_breaks.py", "--backend", "aot_eager"), capture)
    marker = tmp_path / "pwned"
    with Capture.open(capture) as c:
        stage = next(s for s in c.stages("0/0") if s.name == "dynamo")
        graph = c.reader.json_payload(stage.structure_hash)
    node = next(n for n in graph["nodes"] if n["op"] == "call_function")
    node["target"] = target
    node["args"] = [a.format(marker=marker) if isinstance(a, str) else [x.format(marker=marker) for x in a]
                    for a in args]
    digest = add_payload(capture, json.dumps(graph))
    with sqlite3.connect(capture) as db:
        db.execute("UPDATE events SET payload = ? WHERE payload = ?", (digest, stage.structure_hash))

    out = tmp_path / "out"
    proc = run_dynscope("minify", "--from", str(capture), "--compile", "0/0", "--out", str(out), cwd=tmp_path)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]  # after the progress lines: one line saying why
    assert last.startswith("dynscope: compile 0/0 cannot be rebuilt from the capture")
    assert f"target {target} is not an allowed graph operation" in last
    assert "Traceback" not in proc.stderr
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p != out) == ["tampered.dynscope"]  # nothing else written


def test_a_second_run_writing_the_same_capture_is_refused(tmp_path):
    with explain_holding_its_capture(tmp_path) as (first, capture):
        second = run_dynscope("explain", "-q", "-o", str(capture), str(PROGRAMS / "slow_writer.py"),
                              str(tmp_path / "gate"), cwd=tmp_path)
        assert second.returncode == 2
        assert second.stdout == ""  # the program never ran
        assert second.stderr.startswith(f"dynscope: another dynscope run (pid {first.pid}) is writing {capture}")
        assert second.stderr.count("\n") == 1
    out, err = first.ended
    assert first.returncode == 3, err
    assert out == "done\n"
    summary = run_dynscope("summary", str(capture), "--json")
    assert summary.returncode == 0, summary.stderr
    assert json.loads(summary.stdout)["totals"]["compiles"] == 2  # the first run's file, whole and unmixed
    assert not Path(str(capture) + ".lock").exists()


def test_a_full_disk_ends_recording_with_one_line_and_the_programs_own_status(small_filesystem, tmp_path):
    capture = small_filesystem / "run.dynscope"
    proc = run_dynscope("explain", "-q", "-o", str(capture), str(PROGRAMS / "fills_disk.py"), cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout == "program finished\n"
    lines = [line for line in proc.stderr.splitlines() if line.startswith("dynscope:")]
    assert lines == [f"dynscope: stopped recording to {capture}: the disk is full; the capture keeps "
                     "everything recorded before this point"], proc.stderr
    assert "Traceback" not in proc.stderr
    summary = run_dynscope("summary", str(capture), "--json")
    assert summary.returncode == 0, summary.stderr  # what was written before is readable
