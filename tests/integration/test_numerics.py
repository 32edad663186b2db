"""dynscope numerics end to end (Inductor on CPU, one small compile each): the injected relu bug is
named as the first suspect with its kernel and line, the same program without it is within eager's
error, a bf16 block's fused rounding is not blamed, and --from asks before it reruns anything."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, run_dynscope

RELU_BUG = EXAMPLES / "numerics_relu_bug.py"
RELU_LINE = next(i for i, line in enumerate(RELU_BUG.read_text().splitlines(), 1) if "torch.relu(" in line)


def numerics(tmp_path, *program: str) -> tuple[int, dict, str]:
    out = tmp_path / "numerics.json"
    done = run_dynscope("numerics", "-o", str(tmp_path / "run.dynscope"), "--json", str(out), *program, cwd=tmp_path)
    assert out.exists(), done.stderr[-3000:]
    return done.returncode, json.loads(out.read_text()), done.stderr


@pytest.fixture(scope="module")
def relu_bug(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("relu_bug")
    return (tmp, *numerics(tmp, str(RELU_BUG), "--inject-relu-bug", "--calls", "1"))


def test_the_injected_relu_bug_is_the_first_suspect_with_its_kernel_and_line(relu_bug):
    _, status, doc, err = relu_bug
    assert status == 1 and doc["verdict"] == "suspect" and doc["exit_status"] == 1
    first = doc["first_suspect"]
    assert first["node"] == "relu" and first["op"] == "aten.relu.default"
    assert first["kernel"].startswith("cpp_fused") and "relu" in first["kernel"]
    assert first["source"] == f"{RELU_BUG}:{RELU_LINE}" and first["stack"][-1]["line"] == RELU_LINE
    assert first["compiled_error"] > 1000 * first["eager_error"]
    earlier = [n for n in doc["nodes"] if n["index"] < first["index"]]
    assert earlier and not any(n["suspect"] for n in earlier)
    # what the command says: the criterion and the first suspect's kernel and line
    assert "criterion:" in err and "fp64_ref" in err and first["kernel"] in err and f":{RELU_LINE}" in err


def test_without_the_bug_the_compiled_run_is_within_eagers_error(tmp_path):
    status, doc, err = numerics(tmp_path, str(RELU_BUG), "--calls", "1")
    assert status == 0 and doc["verdict"] == "within" and doc["suspects"] == 0 and doc["first_suspect"] is None
    assert doc["nodes_compared"] >= 3 and "relu" in {n["node"] for n in doc["nodes"]}
    assert "within eager's own error" in err


def test_a_bf16_blocks_fused_rounding_is_not_blamed(tmp_path):
    status, doc, err = numerics(tmp_path, str(EXAMPLES / "numerics_bf16.py"))
    assert status == 0 and doc["verdict"] == "within" and doc["suspects"] == 0
    assert doc["program_dtype"] == "bfloat16" and doc["reference_dtype"] == "float32"
    assert any(n["compiled_error"] > 0 for n in doc["nodes"])  # bf16 rounding is there, within eager's own


def test_from_a_capture_shows_the_command_and_refuses_without_a_terminal_or_yes(relu_bug):
    tmp, *_ = relu_bug
    done = run_dynscope("numerics", "--from", str(tmp / "run.dynscope"), cwd=tmp, input="")
    assert done.returncode == 2 and "numerics --from runs it again" in done.stderr and "--yes" in done.stderr
    assert str(RELU_BUG) in done.stderr and "Traceback" not in done.stderr


def test_a_program_with_no_inductor_graph_is_exit_2_in_one_line(tmp_path):
    program = tmp_path / "eager_only.py"
    program.write_text("import torch\nf = torch.compile(lambda x: x.relu() + 1, backend='eager')\nprint(f(torch.ones(4)).sum().item())\n")
    done = run_dynscope("numerics", "-o", str(tmp_path / "run.dynscope"), str(program), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout.strip() == "8.0"
    assert "no Inductor graph checked" in done.stderr and done.stderr.strip().count("\n") == 0
