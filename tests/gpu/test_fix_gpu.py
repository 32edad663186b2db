"""`dynscope fix` on an NVIDIA GPU: the fix program's model on CUDA, compiled with Inductor
(Triton kernels); the break remedies verified as fixed with equal outputs there too.

Skipped without CUDA. Run on the GPU machine (torch 2.11 + Triton there).
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with Triton")

from conftest import REPO, run_dynscope  # noqa: E402


def test_every_problem_fixed_on_the_gpu(tmp_path):
    for name in ("fix_model.py", "fix_helpers.py"):
        shutil.copy(REPO / "tests" / "programs" / name, tmp_path / name)
    started = time.perf_counter()
    result = run_dynscope("fix", "-o", "fix.json", "fix_model.py", "--backend", "inductor", "--device", "cuda",
                          cwd=tmp_path, timeout=590)
    elapsed = time.perf_counter() - started
    assert result.returncode == 0, result.stderr[-4000:]
    doc = json.loads((tmp_path / "fix.json").read_text())
    # The trials forked from the runner's fork server, on this CUDA build too.
    server_log = (tmp_path / doc["out_dir"] / "fork-server.log").read_text()
    assert "dynscope fork server: forking (each child creates its own CUDA context)" in server_log, server_log
    print(f"dynscope fix on the GPU: {elapsed:.1f} s, {len(doc['trials'])} trials, runs {doc['runs']}")
    print(json.dumps([{k: t[k] for k in ("remedy", "verdict", "max_abs_diff")} for t in doc["trials"]], indent=1))
    by_remedy = {t["remedy"]: t for t in doc["trials"]}
    for part in ("capture_scalar_outputs", "reorderable_logging_functions.add(print)"):
        row = next(t for remedy, t in by_remedy.items() if part in remedy)
        assert row["verdict"] == "fixed" and row["correct"] is True, row
    # With Inductor on CUDA the resume functions after the breaks recompile for the batch size
    # too: marking forward's input dynamic removes forward's recompile, not theirs.
    batch = next(t for remedy, t in by_remedy.items() if "mark_dynamic(x, 0)" in remedy)
    print("mark_dynamic:", batch["verdict"], batch.get("why"), batch["before"], batch["after"])
    print("combined:", json.dumps(doc["combined"])[:1500])
    assert batch["verdict"] in ("fixed", "improved") and batch["correct"] is True
    # The one remedy that changes what the program prints (print only when not compiling) is judged
    # failed, as on the CPU (tests/data/golden/fix_model.fix.json); no other trial fails.
    failed = {t["remedy"]: t["why"] for t in doc["trials"] if t["verdict"] == "failed"}
    assert all("only when not compiling" in remedy for remedy in failed), failed
    assert all(why == "the program printed something else" for why in failed.values()), failed
    assert doc["combined"]["correct"] is True
