"""On an NVIDIA GPU: dynscope numerics names the miscompiled relu's Triton kernel as the first
suspect, and flags an atomic-add scatter as nondeterministic, not as a compiler bug.

Skipped without CUDA. Run on the GPU machine (torch 2.11 + Triton there).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with Triton")

from conftest import EXAMPLES, REPO, run_dynscope  # noqa: E402

RELU_LINE = next(i for i, line in enumerate((EXAMPLES / "numerics_relu_bug.py").read_text().splitlines(), 1)
                 if "torch.relu(" in line)


def numerics(tmp_path, *program: str) -> tuple[int, dict]:
    out = tmp_path / "numerics.json"
    done = run_dynscope("numerics", "-o", str(tmp_path / "run.dynscope"), "--json", str(out), *program, timeout=900)
    print(done.stderr[-3000:])
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return done.returncode, json.loads(out.read_text())


def test_the_relu_bug_is_named_in_its_triton_kernel(tmp_path):
    status, doc = numerics(tmp_path, str(EXAMPLES / "numerics_relu_bug.py"), "--inject-relu-bug", "--device", "cuda")
    assert status == 1 and doc["verdict"] == "suspect"
    first = doc["first_suspect"]
    assert first["node"] == "relu" and first["kernel"].startswith("triton_")
    assert first["source"].endswith(f"numerics_relu_bug.py:{RELU_LINE}")


def test_the_relu_without_the_bug_is_within(tmp_path):
    status, doc = numerics(tmp_path, str(EXAMPLES / "numerics_relu_bug.py"), "--device", "cuda")
    assert status == 0 and doc["suspects"] == 0 and doc["nodes_compared"] > 0


def test_an_atomic_add_scatter_is_nondeterministic_not_suspect(tmp_path):
    status, doc = numerics(tmp_path, str(REPO / "tests" / "programs" / "numerics_scatter.py"), "--device", "cuda")
    assert status == 0 and doc["verdict"] == "nondeterministic", doc
    flagged = [n for n in doc["nodes"] if n["nondeterministic"]]
    assert flagged and not any(n["suspect"] for n in doc["nodes"])
    assert any("index_put" in n["op"] or "index_add" in n["op"] or "scatter" in n["op"] for n in flagged), flagged
