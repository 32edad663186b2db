"""dynscope minify on an NVIDIA GPU: torch's Triton fault injection in Inductor's relu.

Skipped without CUDA. Run on the GPU machine (torch 2.11 + Triton there):
    python -m pytest -q tests/gpu/test_minify_gpu.py
The model is tests/programs/minify_model.py on --device cuda, where --bug sets
torch._inductor.config.triton.inject_relu_bug_TESTING_ONLY.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.inductor,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with Triton")]

from conftest import REPO, run_dynscope  # noqa: E402

MODEL = REPO / "tests" / "programs" / "minify_model.py"


def minify(tmp_path, *args: str) -> tuple[dict, subprocess.CompletedProcess]:
    out = tmp_path / "out"
    proc = run_dynscope("minify", "--out", str(out), *args, timeout=1200)
    assert (out / "result.json").exists(), proc.stderr[-4000:]
    return json.loads((out / "result.json").read_text()), proc


DEVICE_ASSERT = pytest.mark.xfail(strict=False, reason=(
    "seen on an H100 (torch 2.11): detection names the graph, but every failing check leaves a device-side "
    "assert, so each needs a fresh worker process (CUDA does not survive a fork), and shrinking did not finish "
    "within 5 minutes"))


@pytest.mark.parametrize("bug", ["accuracy", "compile_error", pytest.param("runtime_error", marks=DEVICE_ASSERT)])
def test_triton_relu_bug_is_inductor_relu_lowering(tmp_path, bug):
    args = ["--accuracy"] if bug == "accuracy" else ["--timeout", "60"]
    result, proc = minify(tmp_path, *args, str(MODEL), "--device", "cuda", "--bug", bug)
    print(proc.stderr)  # what it found, for the record (pytest -s)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert result["culprit_backend"] == "inductor"
    assert result["passed_backends"] == ["eager", "aot_eager", "aot_eager_decomp_partition"]
    assert result["op"] == "aten.relu.default" and result["subsystem"] == "lowerings"
    assert result["nodes_before"] >= 50 and result["nodes_after"] <= 3
    assert result["verified"]
    repro = (tmp_path / "out" / "repro.py").read_text()
    assert f"torch._inductor.config.triton.inject_relu_bug_TESTING_ONLY = {bug!r}" in repro
    assert "'cuda" in repro  # inputs made on the GPU
    run = subprocess.run([sys.executable, str(tmp_path / "out" / "repro.py")], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode != 0
