"""The capture file: one self-contained SQLite file, deduplicated, versioned, and safe to open."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from conftest import run_dynscope

from dynscope.errors import CaptureError
from dynscope.model import Capture
from dynscope.store.reader import CaptureReader
from dynscope.store.schema import SCHEMA_VERSION
from dynscope.store.writer import CaptureWriter


@pytest.fixture(scope="module")
def capture_path(make_capture):
    return make_capture("recompiles.py", "--backend", "eager")


def test_a_finished_capture_is_one_file_with_compressed_deduplicated_payloads(capture_path):
    assert not capture_path.with_name(capture_path.name + "-wal").exists()
    db = sqlite3.connect(capture_path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    events_with_payload = db.execute("SELECT count(*) FROM events WHERE payload IS NOT NULL").fetchone()[0]
    distinct = db.execute("SELECT count(DISTINCT payload) FROM events").fetchone()[0]
    blobs = db.execute("SELECT count(*) FROM blobs").fetchone()[0]
    assert blobs == distinct < events_with_payload  # identical payloads are stored once
    codecs = dict(db.execute("SELECT codec, count(*) FROM blobs GROUP BY codec").fetchall())
    assert codecs.get("zlib", 0) > 0
    raw_size, stored = db.execute("SELECT sum(size), sum(length(data)) FROM blobs").fetchone()
    assert stored < raw_size / 2


def test_writer_commits_each_event_so_a_reader_sees_it_at_once(tmp_path):
    writer = CaptureWriter(tmp_path / "live.dynscope")
    writer.append("dynscope:run_start", {"argv": []})
    writer.append("artifact:example", {"n": 1}, "payload text " * 50)
    reader = CaptureReader(tmp_path / "live.dynscope")  # while the writer is still open
    events = reader.events()
    assert [e.name for e in events] == ["dynscope:run_start", "artifact:example"]
    assert reader.payload(events[1].payload_hash) == "payload text " * 50
    writer.close()


def test_truncated_capture_is_reported_in_one_line(tmp_path, capture_path):
    damaged = tmp_path / "damaged.dynscope"
    data = capture_path.read_bytes()
    damaged.write_bytes(data[: len(data) // 2])
    with pytest.raises(CaptureError, match="truncated"):
        Capture.open(str(damaged))
    result = run_dynscope("summary", str(damaged))
    assert result.returncode != 0 and result.stderr.startswith("dynscope: ") and result.stderr.count("\n") == 1
    assert "truncated" in result.stderr and "Traceback" not in result.stderr


def test_capture_from_a_newer_dynscope_is_refused_clearly(tmp_path, capture_path):
    newer = tmp_path / "newer.dynscope"
    shutil.copy(capture_path, newer)
    db = sqlite3.connect(newer)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    result = run_dynscope("summary", str(newer))
    assert result.returncode != 0 and result.stderr.count("\n") == 1
    assert f"newer dynscope (capture schema {SCHEMA_VERSION + 1}" in result.stderr


def test_reading_a_capture_never_imports_torch(capture_path):
    import subprocess
    import sys

    code = (
        "import sys; from dynscope.model import Capture; from dynscope.analysis.summary import summary_document;"
        "from dynscope.analysis.run_view import run_view;"
        f"summary_document(run_view(Capture.open({str(capture_path)!r}))); print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


def test_python_api_records_a_block(tmp_path):
    """`with dynscope.capture(path):` around a compile, in this very process."""
    import torch

    import dynscope
    import dynscope.model  # importing the model (and the capture store) must not shadow dynscope.capture

    with dynscope.capture(str(tmp_path / "api.dynscope")) as recording:
        torch.compile(lambda x: torch.relu(x) + 1, backend="eager")(torch.randn(4))
    capture = recording.load()
    assert [c.status for c in capture.compiles()] == ["ok"]
    assert capture.recorded_stage_names(capture.compiles()[0].compile_id)[:2] == ["bytecode", "dynamo"]
    assert capture.run.exit_code == 0


def test_python_api_restores_torch_settings_afterwards(tmp_path):
    import torch

    import dynscope

    before = torch._inductor.config.force_disable_caches
    with dynscope.capture(str(tmp_path / "api.dynscope")):
        assert torch._inductor.config.force_disable_caches is True
    assert torch._inductor.config.force_disable_caches == before


def test_probes_are_removed_cleanly_and_do_not_change_results(tmp_path):
    import logging

    import torch
    import torch._dynamo.guards as guards

    import dynscope
    from dynscope.probes import compat

    # The hooks this torch has (2.6 has no log_graph_break method: that probe is unavailable there).
    translator = compat.instruction_translator_class()

    def probed_functions():
        return (getattr(translator, "log_graph_break", None), guards.get_guard_fail_reason,
                torch.fx.GraphModule.print_readable)

    trace_logger = logging.getLogger("torch.__trace")

    def handlers():
        # torch's LazyTraceHandler with no trace directory removes itself on the first event it sees
        # ("We go poof"), with or without dynscope: whether it is still there depends on test order.
        return [h for h in trace_logger.handlers
                if not (type(h).__name__ == "LazyTraceHandler" and getattr(h, "root_dir", None) is None)]

    handlers_before, functions_before = handlers(), probed_functions()
    logger_before = (trace_logger.level, trace_logger.propagate)

    def run(x):
        torch._dynamo.reset()
        return torch.compile(lambda t: torch.nn.functional.gelu(t) * t.sum(), backend="aot_eager")(x)

    x = torch.randn(5, 3)
    plain = run(x)
    with dynscope.capture(str(tmp_path / "probed.dynscope")):
        assert probed_functions() != functions_before  # the probes are in
        assert not trace_logger.propagate  # the trace goes to the capture only, never to the root's handlers
        probed = run(x)
    assert torch.equal(plain, probed)
    assert probed_functions() == functions_before
    assert handlers() == handlers_before
    assert (trace_logger.level, trace_logger.propagate) == logger_before
