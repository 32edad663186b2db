"""Edge cases no recorded run shows, built with the fake-capture builder (no torch)."""

from __future__ import annotations

import io
import json

from fake_capture import FakeCapture

from dynscope.model import Capture
from dynscope.model.output_code import kernel_names, split_kernels
from dynscope.reporters import prepare_report

INFERENCE_HEADER = "# AOT ID: ['0_inference']\n"


def test_a_run_cut_off_mid_compile_says_where_it_stopped(tmp_path):
    path = FakeCapture(tmp_path / "run.dynscope").compile("0/0").start("1/0", line=9, function="g").close(exit_code=None)
    with Capture.open(str(path)) as c:
        assert [(x.compile_id, x.status) for x in c.compiles()] == [("0/0", "ok"), ("1/0", "incomplete")]
        assert (c.compile("1/0").function, c.compile("1/0").line) == ("g", 9)  # from Dynamo's start event
        assert {s.missing_reason for s in c.stages("1/0")} == {"not reached: the run ended during this compile"}
        assert c.run.exit_code is None and c.not_understood() == {}


def test_a_failed_compile_is_an_error_and_its_stages_say_so(tmp_path):
    path = (FakeCapture(tmp_path / "run.dynscope").start("0/0")
            .metrics("0/0", fail_type="TorchRuntimeError", fail_reason="boom").close(exit_code=1))
    with Capture.open(str(path)) as c:
        [error] = c.errors()
        assert (error.compile_id, error.fail_type, error.reason) == ("0/0", "TorchRuntimeError", "boom")
        missing = {s.key: s.missing_reason for s in c.stages("0/0") if not s.recorded}
        assert missing.pop("bytecode") == "not logged by torch for this frame"
        assert set(missing.values()) == {"not reached: the compile failed (TorchRuntimeError)"}


def test_output_code_with_no_kernels_is_recorded_with_none(tmp_path):
    # A graph of views only: Inductor returns a reinterpreted input and launches nothing.
    code = INFERENCE_HEADER + "def call(args):\n    arg0_1, = args\n    return (reinterpret_tensor(arg0_1, (4,), (1,), 0), )\n"
    path = FakeCapture(tmp_path / "run.dynscope").compile("0/0").output_code("0/0", code).close()
    with Capture.open(str(path)) as c:
        assert c.kernels("0/0") == [] and c.stage("0/0", "output_code").recorded
        assert not any(s.key.startswith("kernel:") for s in c.stages("0/0"))


def test_output_code_cut_mid_kernel_keeps_the_kernels_start():
    # A stage over the read bound is shown cut; its last kernel must not vanish.
    code = INFERENCE_HEADER + "cpp_fused_0 = async_compile.cpp_pybinding(['float*'], '''\nextern \"C\" void kernel(float* x) {\n"
    [kernel] = split_kernels(code)
    assert (kernel.name, kernel.language) == ("cpp_fused_0", "cpp") and 'extern "C"' in kernel.source
    assert kernel_names(code) == ["cpp_fused_0"]


def test_repeated_extern_calls_get_numbered_names():
    code = INFERENCE_HEADER + "".join(f"    buf{i} = extern_kernels.mm(a, b)\n" for i in range(3))
    assert kernel_names(code) == [k.name for k in split_kernels(code)] == [
        "extern_kernels.mm", "extern_kernels.mm#2", "extern_kernels.mm#3"]


def test_a_guard_failure_in_unknown_words_is_kept_whole(tmp_path):
    path = (FakeCapture(tmp_path / "run.dynscope").compile("0/0").compile("0/1")
            .recompile("0/1", "0/0: ___check_obj_id(L['fn'], 140)", "words no torch wrote yet").close())
    with Capture.open(str(path)) as c:
        [recompile] = c.recompiles()
        assert recompile.compile_id == "0/1" and recompile.reason == "___check_obj_id(L['fn'], 140)"
        known, unknown = recompile.failures
        assert known.failed_compile_id == "0/0" and (known.expected, known.actual) == (None, None)
        assert unknown.reason == "words no torch wrote yet"  # shown as torch said it, not dropped
        assert c.not_understood() == {}


def test_a_break_without_a_user_stack_is_still_listed_and_reported(tmp_path):
    path = FakeCapture(tmp_path / "run.dynscope").compile("0/0").graph_break("0/0", "Unsupported", line=None).close()
    with Capture.open(str(path)) as c:
        [b] = c.graph_breaks()
        assert (b.gb_type, b.location.file, b.location.line) == ("Unsupported", None, None)
        out = io.StringIO()
        prepare_report("json", [c]).render(out)
        [reported] = json.loads(out.getvalue())["graph_breaks"]
        assert reported["gb_type"] == "Unsupported" and reported["line"] is None


def test_an_empty_run_reports_zero_of_everything(tmp_path):
    path = FakeCapture(tmp_path / "run.dynscope").close()
    with Capture.open(str(path)) as c:
        assert c.compiles() == [] and c.graph_breaks() == [] and c.recompiles() == []
        out = io.StringIO()
        prepare_report("md", [c]).render(out)
        assert out.getvalue().strip()  # a report that says nothing compiled, not a crash
