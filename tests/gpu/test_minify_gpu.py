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
import time

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


# The acceptance criterion for the device-side assert: minified, with a repro proven, in
# under 5 minutes. Every failing check there poisons its worker's CUDA context; the workers are
# forked from a fork server that never initialized CUDA, so each replacement is a fork and a new
# CUDA context, not a fresh interpreter.
RUNTIME_ERROR_LIMIT_S = 300


@pytest.mark.parametrize("bug", ["accuracy", "compile_error", "runtime_error"])
def test_triton_relu_bug_is_inductor_relu_lowering(tmp_path, bug):
    args = ["--accuracy"] if bug == "accuracy" else ["--timeout", "60"]
    started = time.monotonic()
    result, proc = minify(tmp_path, *args, str(MODEL), "--device", "cuda", "--bug", bug)
    elapsed = time.monotonic() - started
    print(proc.stderr)  # what it found, for the record (pytest -s)
    worker_log = (tmp_path / "out" / "worker.log").read_text(errors="replace")
    server = [line for line in worker_log.splitlines() if line.startswith("dynscope fork server:")]
    print(f"{bug}: {elapsed:.1f} s, {result.get('checks_run')} checks run; {server}")
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
    # Workers were forked, each with its own CUDA context (the server initialized none).
    assert server == ["dynscope fork server: forking (each child creates its own CUDA context)"], worker_log[-4000:]
    if bug == "runtime_error":
        assert elapsed < RUNTIME_ERROR_LIMIT_S, f"took {elapsed:.0f} s"
