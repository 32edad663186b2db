"""TORCH_TRACE logs into captures, without torch: the recorded logs in tests/data/torch_trace."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dynscope.errors import DynscopeError
from dynscope.model import Capture
from dynscope.trace_import import ImportStats, import_logs, parse_trace_lines

DATA = Path(__file__).resolve().parent.parent / "data" / "torch_trace"
GRAPH_BREAKS = DATA / "graph_breaks_eager"
RANKS = DATA / "rank_divergence"


def _lines(directory: Path) -> list[str]:
    (path,) = directory.glob("*.log.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines(keepends=True)


def test_a_log_line_and_its_payload_become_one_event():
    stats = ImportStats()
    lines = [
        'V1123 22:29:31.219000 6165 torch/_dynamo/x.py:5098] {"artifact": {"name": "demo", "encoding": "string"}, '
        '"frame_id": 0, "frame_compile_id": 1, "attempt": 0, "has_payload": "900150983cd24fb0d6963f7d28e17f72"}\n',
        "\tabc\n",
        'V1123 22:29:31.500000 6165 torch/_dynamo/x.py:1] {"str": ["/a.py", 0]}\n',
    ]
    records = list(parse_trace_lines(iter(lines), stats, year=2026))
    assert [r.metadata.get("frame_compile_id") for r in records] == [1, None]
    assert records[0].payload == "abc" and records[1].payload is None
    assert records[0].pid == 6165 and records[0].line == 1
    assert abs(records[1].ts - records[0].ts - 0.281) < 1e-6
    assert (stats.bad_lines, stats.payload_mismatches) == (0, 0)


def test_truncated_and_foreign_lines_are_counted_not_fatal():
    stats = ImportStats()
    lines = ["\torphan payload\n", "not a trace line\n", "\tits payload\n",
             'V1123 22:29:31.219000 6165 torch/x.py:1] {"dynamo_start": {"stack": [',
             ]
    assert list(parse_trace_lines(iter(lines), stats)) == []
    assert stats.lines == 4 and stats.bad_lines == 3
    assert [e.split(": ", 1)[0] for e in stats.bad_examples] == ["log:1", "log:2", "log:4"]
    assert "truncated" in stats.bad_examples[2]


def test_imported_graph_breaks_compiles_and_missing_parts(tmp_path):
    (done,) = import_logs([str(GRAPH_BREAKS)], str(tmp_path / "gb.dynscope"))
    assert done.stats.bad_lines == 0 and done.stats.events > 100 and not done.stats.unknown_events
    with Capture.open(done.path) as capture:
        assert [c.function for c in capture.compiles()] == [
            "forward", "torch_dynamo_resume_in_forward_at_20", "torch_dynamo_resume_in_forward_at_21",
            "torch_dynamo_resume_in_forward_at_23", "torch_dynamo_resume_in_forward_at_25"]
        breaks = capture.graph_breaks()
        assert [(b.gb_type, b.gb_id, b.location.line) for b in breaks] == [
            ("Failed to trace builtin operator", "GB0059", 20),
            ("Data-dependent branching", "GB0170", 21),
            ("Unsupported Tensor.item() call with capture_scalar_outputs=False", "GB0124", 23),
            ("Call to `torch._dynamo.graph_break()`", "GB0025", 25)]
        assert breaks[0].resumed_into == "torch_dynamo_resume_in_forward_at_20"
        assert breaks[1].hints and breaks[1].explanation.startswith("Detected data-dependent branching")
        assert capture.run.torch_version == "2.13.0+cpu"
        # What a log cannot hold is marked missing, with the reason.
        assert capture.run.probes["fx_graphs"] is False
        assert "TORCH_TRACE" in capture.run.probe_details["fx_graphs"]
        bytecode = capture.stages("0/0")[0]
        assert bytecode.name == "bytecode" and not bytecode.recorded
        assert "not in a TORCH_TRACE log" in bytecode.missing_reason


def test_a_log_cut_in_the_middle_imports_what_it_holds(tmp_path):
    lines = _lines(GRAPH_BREAKS)
    cut = tmp_path / "dedicated_log_torch_trace_cut.log"
    text = "".join(lines)
    cut.write_text(text[: len(text) // 3] + '\nV1123 22:31:00.000000 1 torch/x.py:1] {"dynamo_st')
    (done,) = import_logs([str(cut)], str(tmp_path / "cut.dynscope"))
    # The cut line, and the line we appended cut short, are counted; nothing else is lost.
    assert 1 <= done.stats.bad_lines <= 2 and "truncated" in done.stats.bad_examples[-1]
    with Capture.open(done.path) as capture:
        assert 1 <= len(capture.compiles()) < 5
        assert capture.graph_breaks()[0].location.line == 20


def test_unknown_events_are_kept_and_counted(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text('V1123 22:29:31.219000 1 torch/x.py:1] {"from_the_future": {"a": 1}, "frame_id": 0, '
                   '"frame_compile_id": 0}\n'
                   'V1123 22:29:31.219000 1 torch/x.py:1] {"str": ["/a.py", 0]}\n')
    (done,) = import_logs([str(log)], str(tmp_path / "x.dynscope"))
    assert done.stats.unknown_events == {"from_the_future": 1}
    with Capture.open(done.path) as capture:
        assert capture.reader.meta["imported"]["unknown_events"] == {"from_the_future": 1}
        assert [e.compile_id for e in capture.reader.events(["from_the_future"])] == ["0/0"]


def test_one_capture_per_rank(tmp_path):
    done = import_logs([str(RANKS)], str(tmp_path / "run.dynscope"))
    assert [(d.rank, Path(d.path).name) for d in done] == [(0, "run.rank0.dynscope"), (1, "run.rank1.dynscope")]
    with Capture.open(done[1].path) as capture:
        assert capture.run.rank == 1
        assert [b.location.line for b in capture.graph_breaks()] == [18, 18]


def test_bad_paths_are_one_clear_error(tmp_path):
    with pytest.raises(DynscopeError, match="no such file"):
        import_logs([str(tmp_path / "missing")], str(tmp_path / "x.dynscope"))
    with pytest.raises(DynscopeError, match="no TORCH_TRACE logs"):
        import_logs([str(tmp_path)], str(tmp_path / "x.dynscope"))
    not_a_log = tmp_path / "notes.txt"
    not_a_log.write_text("hello\n")
    with pytest.raises(DynscopeError, match="is it a TORCH_TRACE log.*notes.txt:1: not a structured-trace line"):
        import_logs([str(not_a_log)], str(tmp_path / "x.dynscope"))
    assert not (tmp_path / "x.dynscope").exists()


def test_import_and_reading_never_import_torch(tmp_path):
    code = (f"import sys; from dynscope.commands import main; "
            f"rc = main(['import', '-q', {str(RANKS)!r}, '-o', {str(tmp_path / 'r.dynscope')!r}]); "
            f"rc |= main(['summary', '--json', {str(tmp_path / 'r.rank0.dynscope')!r}, "
            f"{str(tmp_path / 'r.rank1.dynscope')!r}]); "
            f"assert 'torch' not in sys.modules, 'torch was imported'; sys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["schema"] == "dynscope.summary-set/1"


def test_a_gzip_cut_short_imports_what_it_holds(tmp_path):
    (source,) = GRAPH_BREAKS.glob("*.log.gz")
    data = source.read_bytes()
    cut = tmp_path / "dedicated_log_torch_trace_cut.log.gz"
    cut.write_bytes(data[: len(data) // 2])
    (done,) = import_logs([str(cut)], str(tmp_path / "cut.dynscope"))
    assert any("stopped reading" in e for e in done.stats.bad_examples)
    with Capture.open(done.path) as capture:
        assert capture.compiles() and capture.graph_breaks()[0].location.line == 20


def test_cache_hits_and_misses_that_differ_between_ranks(tmp_path):
    """Hand-written logs (two ranks, one compile each): rank 0 hits the AOTAutograd cache, rank 1 misses."""
    from dynscope.analysis.ranks import divergence

    def log(rank: int, outcome: str) -> None:
        ids = '"frame_id": 0, "frame_compile_id": 0, "attempt": 0'
        (tmp_path / f"dedicated_log_torch_trace_rank_{rank}_x.log").write_text(
            f'V1123 22:29:31.000000 1 torch/x.py:1] {{"str": ["/m.py", 0]}}\n'
            f'V1123 22:29:31.100000 1 torch/x.py:1] {{"dynamo_start": {{"stack": [{{"line": 7, "name": "f", '
            f'"filename": 0}}]}}, {ids}}}\n'
            f'V1123 22:29:31.200000 1 torch/x.py:1] {{"artifact": {{"name": "aotautograd_cache_{outcome}", '
            f'"encoding": "json"}}, {ids}, "has_payload": "x"}}\n\t{{}}\n'
            f'V1123 22:29:31.300000 1 torch/x.py:1] {{"compilation_metrics": {{"co_name": "f", "co_filename": "/m.py",'
            f' "co_firstlineno": 7, "has_guarded_code": true, "graph_op_count": 1}}, {ids}}}\n')

    log(0, "hit")
    log(1, "miss")
    done = import_logs([str(tmp_path)], str(tmp_path / "c.dynscope"))
    captures = [Capture.open(d.path) for d in done]
    try:
        found = divergence(captures)
    finally:
        for c in captures:
            c.close()
    assert [(d.what, d.ranks, d.line, d.function) for d in found] == [("cache", (1,), 7, "f")]
    assert found[0].detail == "rank 1 alone has aotautograd cache miss in f, where rank 0 has aotautograd cache hit in f"


def test_renamed_logs_take_their_rank_from_the_events(tmp_path):
    for rank in (0, 1):
        (source,) = RANKS.glob(f"*rank_{rank}_*.log.gz")
        (tmp_path / f"node{rank}.log.gz").write_bytes(source.read_bytes())
    done = import_logs([str(tmp_path / "node0.log.gz"), str(tmp_path / "node1.log.gz")], str(tmp_path / "r.dynscope"))
    assert [(d.rank, Path(d.path).name) for d in done] == [(0, "r.rank0.dynscope"), (1, "r.rank1.dynscope")]


def test_chunk_boundaries_do_not_change_what_is_read():
    """A real log read whole, line by line, or in chunks of a few characters gives the same records."""
    text = "".join(_lines(GRAPH_BREAKS)[:400])

    def records(chunks):
        stats = ImportStats()
        found = [(r.line, r.metadata, r.payload) for r in parse_trace_lines(chunks, stats, year=2026)]
        return found, (stats.lines, stats.bad_lines, stats.payload_mismatches)

    whole = records([text])
    assert whole[1][1] == 0 and len(whole[0]) > 10  # (the cut at line 400 may end inside a payload)
    assert records(text.splitlines(keepends=True)) == whole
    for size in (1, 2, 7, 4096):
        assert records(text[i:i + size] for i in range(0, len(text), size)) == whole, size
