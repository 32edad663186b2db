"""The parts model/capture.py was split into, each on its own: reading events into records (and
counting those not understood), the classification of failed compiles, kernel provenance handles,
the guard comparisons. Torch-free; a capture where one is needed is written by FakeCapture."""

from __future__ import annotations

from fake_capture import FakeCapture

from dynscope import events
from dynscope.model.failures import FailedCompiles
from dynscope.model.kernels import _provenance_handle
from dynscope.model.reading import RecordReader
from dynscope.model.recompile_text import expected_from_guard
from dynscope.model.records import Compile, CompileTimes, ProgramException
from dynscope.store.reader import CaptureReader

LIMIT = ("torch._dynamo hit config.recompile_limit (8)\n   function: 'f' (f.py:1)\n"
         "   last reason: 0/7: n == 7\nexceeding the recompile_limit cache size limit (currently set to 8)")


def failed(cid: str, fail_type: str | None, reason: str | None = "why") -> Compile:
    return Compile(compile_id=cid, frame_id=0, frame_compile_id=0, attempts=1, function="f", file="f.py", line=1,
                   status="failed" if fail_type else "ok", fail_type=fail_type, fail_reason=reason if fail_type else None,
                   fail_file=None, fail_line=None, started=None, times=CompileTimes(), graph_op_count=1,
                   graph_node_count=1, guard_count=0, restart_reasons=(), user_stack=())


def test_failed_compiles_are_errors_skipped_frames_or_the_recompile_limit():
    ok, skipped = failed("0/0", None), failed("1/0", "Unsupported", "Data dependent operator\n  Explanation: ...")
    limit, error = failed("0/8", "Unsupported", LIMIT), failed("2/0", "TorchRuntimeError", "shape mismatch")
    run = FailedCompiles([ok, skipped, limit, error], exception=None)
    assert [run.kind(c) for c in (ok, skipped, limit, error)] == [None, "skipped", "limit", "error"]
    assert [e.compile_id for e in run.errors()] == ["2/0"]
    assert [(s.compile_id, s.headline) for s in run.skipped_frames()] == [("1/0", "Data dependent operator")]
    hits = run.recompile_limit_hits()
    assert [(h.compile_id, h.limit_name, h.limit, h.fatal) for h in hits] == [("0/8", "recompile_limit", 8, False)]


def test_a_soft_failure_that_ended_the_program_is_its_error():
    # fullgraph=True: torch raised the limit (an Unsupported) into the program; the last such compile is fatal.
    first, last = failed("0/8", "Unsupported", LIMIT), failed("0/9", "Unsupported", LIMIT)
    run = FailedCompiles([first, last], ProgramException("Unsupported", "torch._dynamo.exc", "limit", ""))
    assert run.fatal_compile == "0/9"
    assert [run.kind(first), run.kind(last)] == ["limit", "error"]
    assert [(h.compile_id, h.fatal) for h in run.recompile_limit_hits()] == [("0/8", False), ("0/9", True)]
    assert FailedCompiles([first], ProgramException("ValueError", "builtins", "x", "")).fatal_compile is None


def test_records_not_understood_are_counted_per_kind_with_the_first_reason(tmp_path):
    fake = FakeCapture(tmp_path / "run.dynscope")
    fake.compile("0/0")
    fake.writer.append(events.ProbeError.KIND, {"message": 3})  # not the declared shape
    fake.writer.append(events.ProbeError.KIND, {"message": ["x"]})
    events.write(fake.writer, events.ProbeError(message="a probe failed"))
    fake.writer.append("dynscope:from_the_future", {})
    metrics = events.CompilationMetrics(co_name="g", graph_op_count=2).to_metadata()
    metrics["compilation_metrics"]["graph_op_count"] = "two"  # read field by field through SQLite
    fake.writer.append(events.CompilationMetrics.KIND, metrics, compile_id="1/0")
    with CaptureReader(fake.close()) as reader:
        records = RecordReader(reader)
        assert [r.message for r, _ in records.records(events.ProbeError)] == ["a probe failed"]
        rows = records.rows(events.CompilationMetrics)
        assert [(row.compile_id, m.co_name) for row, m in rows] == [("0/0", "forward")]
        tally = records.tally()
    assert tally[events.ProbeError.KIND][0] == 2 and "message" in tally[events.ProbeError.KIND][1]
    assert tally[events.CompilationMetrics.KIND][0] == 1 and "graph_op_count" in tally[events.CompilationMetrics.KIND][1]
    assert tally["dynscope:from_the_future"] == (1, "an event kind dynscope does not know")


def test_kernel_provenance_handles_and_repeated_extern_calls():
    handles = ["triton_poi_fused_add_0:1", "extern_kernels.mm:3", "extern_kernels.mm:7"]
    assert _provenance_handle("triton_poi_fused_add_0", handles) == "triton_poi_fused_add_0:1"
    assert _provenance_handle("extern_kernels.mm", handles) == "extern_kernels.mm:3"
    assert _provenance_handle("extern_kernels.mm#2", handles) == "extern_kernels.mm:7"
    assert _provenance_handle("extern_kernels.mm#3", handles) is None
    assert _provenance_handle("cpp_fused_1", handles) is None


def test_what_a_guard_expected():
    assert expected_from_guard("n == 2") == "2"
    assert expected_from_guard("mode == 'a'") == "'a'"
    assert expected_from_guard("L['y'] is None") == "None"
    assert expected_from_guard("not ___dict_contains('k', G['d'])") is None
    assert expected_from_guard("tensor 'x' dtype mismatch. expected == float32") is None  # torch's prose
