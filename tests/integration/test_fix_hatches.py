"""dynscope fix tries torch's escape hatches where no specific rule answers a break:
tests/programs/fix_hatch.py (a helper that takes a lock), backend eager. One fix run (about 15 s):
nonstrict_trace and leaf_function each remove the break with the graph whole ("fixed", outputs
equal), torch.compiler.disable only moves the helper to eager, and the change to make is the hatch
that keeps the graph whole, first in catalogue order. The program's file is not touched."""

from __future__ import annotations

import json
import shutil

from conftest import REPO, python_file_hashes, run_dynscope

PROGRAMS = REPO / "tests" / "programs"


def _fix(tmp_path, program: str) -> dict:
    """fix's document for a copy of one of the test programs; the copy's files are left as they were."""
    shutil.copy(PROGRAMS / program, tmp_path / "prog.py")
    before = python_file_hashes(tmp_path)
    result = run_dynscope("fix", "-o", "fix.json", "prog.py", cwd=tmp_path, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    assert python_file_hashes(tmp_path) == before
    return json.loads((tmp_path / "fix.json").read_text())


def test_a_hatch_keeps_the_helper_in_the_graph_where_disable_moves_it_to_eager(tmp_path):
    doc = _fix(tmp_path, "fix_hatch.py")
    rows = {t["rewrite"]["rule"] if "rewrite" in t else t["applies_as"]: t for t in doc["trials"]}
    assert sorted(rows) == ["leaf-function", "nonstrict-trace", "wrap"]
    for rule in ("nonstrict-trace", "leaf-function"):
        row = rows[rule]
        assert row["verdict"] == "fixed" and row["correct"] is True, row
        assert row["after"]["count"] == 0 and row["after"]["graph_breaks"] == 0 and row["after"]["graphs"] == 1
    assert rows["leaf-function"]["patch"].count("+@scaled.register_fake\n") == 1
    assert rows["wrap"]["verdict"] == "moved to eager"  # opaque in the graph > moved to eager
    combined = doc["combined"]
    assert combined["verdict"] == "fixed" and combined["correct"] is True and combined["after"]["graph_breaks"] == 0
    assert combined["remedies"] == [rows["nonstrict-trace"]["remedy"]]
    assert "+import torch._dynamo\n" in combined["patch"] and "+@torch._dynamo.nonstrict_trace\n def scaled(x, w):" in combined[
        "patch"]


def test_a_numpy_helper_takes_no_hatch_so_its_caller_method_does(tmp_path):
    doc = _fix(tmp_path, "fix_numpy_caller.py")
    rows = {t["rewrite"]["rule"]: t for t in doc["trials"] if "rewrite" in t}
    assert rows["disable-numpy-helper"]["verdict"] == "moved to eager"
    leaf = rows["leaf-method"]  # on Masking.forward, the caller: the helper itself is arrays in, arrays out
    assert leaf["verdict"] == "fixed" and leaf["correct"] is True, leaf
    assert leaf["after"]["graph_breaks"] == 0 and leaf["after"]["graphs"] == 1
    # the NumPy draws still happen at every call, in eager's order: the printed outputs and gradients are equal
    assert "+def _Masking_forward_leaf(self, hidden):\n+    mask = time_mask(hidden.shape[:2], 0.5, 3)\n" in leaf["patch"]
    combined = doc["combined"]
    assert combined["verdict"] == "fixed" and combined["correct"] is True
    assert combined["remedies"] == [leaf["remedy"]]


def test_a_numpy_helper_whose_result_is_made_a_tensor_becomes_one_custom_op(tmp_path):
    doc = _fix(tmp_path, "fix_numpy_op.py")
    rows = {t["rewrite"]["rule"]: t for t in doc["trials"] if "rewrite" in t}
    op = rows["numpy-helper-op"]  # at the caller's line: the helper and its conversion, nothing else
    assert op["verdict"] == "fixed" and op["correct"] is True, op
    assert op["after"]["graph_breaks"] == 0 and op["after"]["graphs"] == 1
    assert "+        mask = _time_mask_op((batch, steps), 0.5)\n" in op["patch"]
    assert "+        mask = mask.to(device=hidden.device, dtype=torch.bool)\n" in op["patch"]
    assert "+@torch.library.custom_op(" in op["patch"] and "_Masking_forward_leaf" not in op["patch"]
    assert rows["leaf-method"]["verdict"] == "fixed"  # the hatch on the whole caller passes too
    combined = doc["combined"]  # public and the smaller opaque piece: taken before leaf-method on the whole caller
    assert combined["verdict"] == "fixed" and combined["correct"] is True and combined["after"]["graph_breaks"] == 0
    assert combined["remedies"] == [op["remedy"]]
