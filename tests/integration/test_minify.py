"""dynscope minify end to end: real torch.compile, torch's own fault injection, real repros.

The model (tests/programs/minify_model.py --mlp: its three blocks without attention, 19 compute
nodes) uses relu once, in its second block; torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY
breaks Inductor's C++ relu. Without attention Inductor generates far fewer kernels, each a gcc
run in every compile of the model; the GPU test and bench/minify.py keep the 82-node model.
Each injected bug is minified once per module (CPU compiles are slow) and several tests
read that one result. A fault in AOTAutograd (a backend whose GELU decomposition is broken)
must be named as AOT, not Inductor.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_dynscope

from dynscope.model import Capture

MODEL = REPO / "tests" / "programs" / "minify_model.py"
SMALL = "--mlp"  # the model without attention
NODES = 19  # its compute nodes
CLEAN = REPO / "tests" / "programs" / "minify_clean.py"
BACKENDS_BEFORE_INDUCTOR = ["eager", "aot_eager", "aot_eager_decomp_partition"]

pytestmark = pytest.mark.inductor


class Minified:
    def __init__(self, out: Path, proc: subprocess.CompletedProcess) -> None:
        self.out = out
        self.proc = proc
        self.result = json.loads((out / "result.json").read_text())
        self.repro = out / "repro.py"

    def run_repro(self, tmp_path: Path) -> subprocess.CompletedProcess:
        """The repro in a fresh process, from another directory, as someone filing the bug would."""
        return subprocess.run([sys.executable, str(self.repro)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env={k: v for k, v in os.environ.items() if not k.startswith("DYNSCOPE")})

    def forward_calls(self) -> list[str]:
        """The compute statements of Repro.forward."""
        tree = ast.parse(self.repro.read_text())
        repro = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Repro")
        forward = next(n for n in repro.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
        return [ast.unparse(s) for s in forward.body if isinstance(s, ast.Assign)]


def minify(tmp_path_factory, name: str, *args: str) -> Minified:
    out = tmp_path_factory.mktemp(name) / "out"
    proc = run_dynscope("minify", "--out", str(out), *args, timeout=900)
    assert (out / "result.json").exists(), proc.stderr[-4000:]
    return Minified(out, proc)


@pytest.fixture(scope="module")
def compile_error(tmp_path_factory) -> Minified:
    return minify(tmp_path_factory, "compile_error", str(MODEL), SMALL, "--bug", "compile_error")


@pytest.fixture(scope="module")
def runtime_error(tmp_path_factory) -> Minified:
    return minify(tmp_path_factory, "runtime_error", str(MODEL), SMALL, "--bug", "runtime_error")


@pytest.fixture(scope="module")
def accuracy(tmp_path_factory) -> Minified:
    return minify(tmp_path_factory, "accuracy", "--accuracy", str(MODEL), SMALL, "--bug", "accuracy", "--train")


def assert_inductor_relu(run: Minified) -> None:
    result = run.result
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert result["culprit_stage"] == "inductor" and result["culprit_backend"] == "inductor"
    assert result["passed_backends"] == BACKENDS_BEFORE_INDUCTOR
    assert result["subsystem"] == "lowerings"
    assert result["op"] == "aten.relu.default"
    assert result["nodes_before"] == NODES
    assert 1 <= result["nodes_after"] <= 3
    assert result["verified"] is True
    calls = run.forward_calls()
    assert 1 <= len(calls) <= 3 and any("relu" in c for c in calls), calls


def test_compile_error_is_inductor_relu_lowering(compile_error):
    assert_inductor_relu(compile_error)
    assert compile_error.result["kind"] == "compile_error"
    assert "CppCompileError" in compile_error.result["signature"]


def test_compile_error_repro_fails_the_same_way_standalone(compile_error, tmp_path):
    text = compile_error.repro.read_text()
    assert "import dynscope" not in text and "pickle" not in text
    assert "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'" in text
    assert "backend='inductor'" in text
    run = compile_error.run_repro(tmp_path)
    assert run.returncode != 0
    assert "CppCompileError" in run.stderr and "was not declared in this scope" in run.stderr


def test_compile_error_report_and_capture(compile_error):
    stderr = compile_error.proc.stderr
    assert "lowering of aten.relu.default" in stderr and "Traceback" not in stderr
    assert str(compile_error.repro) in stderr and "verified" in stderr
    capture = compile_error.out / "minify_model.dynscope"
    with Capture.open(str(capture)) as cap:
        results = cap.minify_results()
    assert len(results) == 1
    result = results[0]
    assert (result.compile_id, result.culprit_stage, result.op) == ("0/0", "inductor", "aten.relu.default")
    assert result.verified and result.repro == str(compile_error.repro)
    assert result.checks_run == compile_error.result["checks_run"] > 0
    assert (result.nodes_before, result.nodes_after) == (NODES, compile_error.result["nodes_after"])


def test_every_view_of_the_capture_shows_the_minify_result(compile_error, tmp_path):
    capture = str(compile_error.out / "minify_model.dynscope")
    summary = run_dynscope("summary", capture)
    assert "dynscope minify: compile 0/0" in summary.stdout and "lowering of aten.relu.default" in summary.stdout
    (entry,) = json.loads(run_dynscope("summary", capture, "--json").stdout)["minify"]
    assert (entry["op"], entry["verified"], entry["repro"]) == ("aten.relu.default", True, str(compile_error.repro))
    assert run_dynscope("report", capture, "-o", str(tmp_path / "r.html")).returncode == 0
    html = (tmp_path / "r.html").read_text()
    assert "dynscope minify: compile error" in html and "fails the same way in a fresh process" in html
    markdown = run_dynscope("report", capture, "--format", "md").stdout
    assert "#### dynscope minify" in markdown and "`aten.relu.default`" in markdown


def test_resume_reuses_every_check(compile_error):
    again = run_dynscope("minify", "--resume", "--out", str(compile_error.out), str(MODEL), SMALL, "--bug",
                         "compile_error", timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    result = json.loads((compile_error.out / "result.json").read_text())
    assert result["checks_run"] == 0 and result["checks_total"] == compile_error.result["checks_total"]
    assert result["op"] == "aten.relu.default" and result["verified"]
    # repro.py came out byte for byte the same: its proof in a fresh process is not paid again.
    assert any("its verdict was reused" in note for note in result["notes"]), result["notes"]
    assert not any("reused" in note for note in compile_error.result["notes"])


def test_from_capture_finds_the_same_culprit(compile_error, tmp_path):
    out = tmp_path / "from"
    proc = run_dynscope("minify", "--from", str(compile_error.out / "minify_model.dynscope"), "--compile", "0/0",
                        "--out", str(out), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert (result["culprit_stage"], result["subsystem"], result["op"]) == ("inductor", "lowerings", "aten.relu.default")
    assert result["verified"] and "CppCompileError" in result["signature"]
    # The injected setting came from the capture's record of the run, not from the program.
    assert "inject_relu_bug_TESTING_ONLY = 'compile_error'" in (out / "repro.py").read_text()


def test_runtime_error_is_inductor_relu_lowering(runtime_error, tmp_path):
    # Inductor's C++ relu "throw 1" escapes an OpenMP region: the process aborts. The check
    # worker dies with it on every failing check, and the minifier carries on.
    assert_inductor_relu(runtime_error)
    kind = runtime_error.result["kind"]
    assert kind in ("runtime_error", "crash")
    run = runtime_error.run_repro(tmp_path)
    assert run.returncode != 0
    if kind == "crash":
        assert "SIGABRT" in runtime_error.result["signature"] and run.returncode < 0
    else:
        assert "RuntimeError" in run.stderr


def test_accuracy_in_a_training_step_is_inductor_relu_lowering(accuracy, tmp_path):
    # Found at the Dynamo graph on CPU, where torch's own repro_after="dynamo" with
    # repro_level=4 misses it.
    assert_inductor_relu(accuracy)
    assert accuracy.result["kind"] == "accuracy"
    assert "differs from eager" in accuracy.result["signature"]
    text = accuracy.repro.read_text()
    assert "accuracy_problem(" in text and "set_grad_enabled(True)" in text
    run = accuracy.run_repro(tmp_path)
    assert run.returncode != 0
    assert "AssertionError" in run.stderr and "[accuracy:output:values]" in run.stderr


def test_aot_fault_is_named_as_aot_not_inductor(tmp_path_factory):
    run = minify(tmp_path_factory, "aot_fault", str(MODEL), SMALL, "--aot-fault")
    result = run.result
    assert run.proc.returncode == 1  # no torch-only repro can carry the program's own decomposition
    assert result["culprit_stage"] == "aot_autograd"
    assert "decompositions" in result["culprit"] and result["op"] == "aten.gelu.default"
    assert "broken_gelu" in result["culprit"]
    assert result["passed_backends"] == [*BACKENDS_BEFORE_INDUCTOR, "inductor"]
    assert not result["verified"] and result["repro"] is None
    assert "AOTAutograd" in run.proc.stderr and "Inductor" not in run.proc.stderr.split("culprit")[1].splitlines()[0]


# -- bad input: one line, non-zero exit, no traceback --------------------------------------------


def assert_one_line_error(proc: subprocess.CompletedProcess, exit_code: int, *fragments: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("dynscope: ") and "…" not in line]
    assert proc.returncode == exit_code, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1 and all(f in lines[0] for f in fragments), proc.stderr


def test_missing_script(tmp_path):
    assert_one_line_error(run_dynscope("minify", "nope.py", cwd=tmp_path), 2, "cannot run nope.py", "no such file")


def test_nothing_to_run(tmp_path):
    assert_one_line_error(run_dynscope("minify", cwd=tmp_path), 2, "needs a program")


def test_clean_program_has_no_failure(tmp_path):
    proc = run_dynscope("minify", "--out", str(tmp_path / "out"), str(CLEAN), cwd=tmp_path, timeout=300)
    assert_one_line_error(proc, 1, "no failure found", "compiled and ran cleanly", "--accuracy")


def test_failure_outside_compiled_code(tmp_path):
    proc = run_dynscope("minify", "--out", str(tmp_path / "out"), str(CLEAN), "--fail", cwd=tmp_path, timeout=300)
    assert_one_line_error(proc, 1, "no torch.compile failure found", "outside compiled code")


def test_capture_without_that_compile(compile_error, tmp_path):
    capture = compile_error.out / "minify_model.dynscope"
    proc = run_dynscope("minify", "--from", str(capture), "--compile", "7/0", cwd=tmp_path)
    assert_one_line_error(proc, 2, "no compile 7/0")
    assert not list(tmp_path.iterdir())  # nothing written for a bad request


def test_not_a_capture(tmp_path):
    bogus = tmp_path / "bogus.dynscope"
    bogus.write_text("not a capture")
    proc = run_dynscope("minify", "--from", str(bogus), "--compile", "0/0", cwd=tmp_path)
    assert_one_line_error(proc, 2, "not a dynscope capture")


def test_capture_without_a_graph(tmp_path):
    # A compile that Dynamo gave up on before making a graph.
    from dynscope.store.writer import CaptureWriter

    path = tmp_path / "nograph.dynscope"
    writer = CaptureWriter(path)
    writer.append("dynamo_start", {"dynamo_start": {"stack": []}}, compile_id="0/0")
    writer.append("compilation_metrics", {"compilation_metrics": {
        "compile_id": "0/0", "co_name": "f", "fail_type": "Unsupported", "fail_reason": "graph break"}},
        compile_id="0/0")
    writer.close()
    proc = run_dynscope("minify", "--from", str(path), "--compile", "0/0", cwd=tmp_path)
    assert_one_line_error(proc, 2, "compile 0/0", "has no recorded Dynamo graph", "Unsupported")


def test_the_tui_overview_shows_the_minify_result(compile_error):
    from textual.widgets import Static
    from tui_pilot import drive, text_of

    async def script(app, pilot):
        facts = text_of(app.query_one("#run-facts", Static))
        assert "dynscope minify compile 0/0" in facts and "verified repro" in facts

    drive(compile_error.out / "minify_model.dynscope", script, size=(200, 60))
