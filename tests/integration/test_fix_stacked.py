"""dynscope fix retries a rewrite that was a trade-off alone on top of the winners (tests/programs/fix_stacked.py).

The program's `if mask is None and not torch.compiler.is_compiling():` leaves the mask None only
when compiling (the next line raises inside compiled code: a break). drop-compiling-clause removes
that break, but Dynamo then traces on into helper's `.item()` twice more: breaks grow, a
trade-off. keep-tensor removes the `.item()` break. One fix run (backend eager, ~1 min on 2 cores).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import REPO, python_file_hashes, run_dynscope

PROGRAM = "fix_stacked.py"


def test_a_trade_off_rewrite_enters_the_combined_change_only_on_top_of_the_winners(tmp_path: Path) -> None:
    shutil.copy(REPO / "tests" / "programs" / PROGRAM, tmp_path / PROGRAM)
    before = python_file_hashes(tmp_path)
    result = run_dynscope("fix", "--jobs", "2", "--out", "out", "-o", "fix.json", PROGRAM, cwd=tmp_path, timeout=400)
    assert result.returncode == 0, result.stderr[-4000:]
    doc = json.loads((tmp_path / "fix.json").read_text())
    rows = {t["rewrite"]["rule"]: t for t in doc["trials"] if "rewrite" in t}
    clause, keep = rows["drop-compiling-clause"], rows["keep-tensor"]
    # alone: its own break gone, but more .item() breaks: a trade-off, and its row still says so
    assert clause["verdict"] == "trade-off" and clause["after"]["count"] == 0
    assert clause["after"]["graph_breaks"] > doc["baseline"]["graph_breaks"]
    assert keep["verdict"] == "fixed"
    combined = doc["combined"]
    assert clause["remedy"] in combined["remedies"] and keep["remedy"] in combined["remedies"]
    assert combined["verdict"] == "fixed" and combined["correct"] is True and combined["after"]["graph_breaks"] == 0
    assert combined["problems_left"] == []
    assert "rewrite that was a trade-off alone, on top of the winners: breaks and recompiles" in combined["why"]
    assert combined["capture"].endswith("combined-stacked.dynscope") and (tmp_path / "out" / "combined.dynscope").exists()
    # the guess that every remedy wins ran the winners and the trade-off together: it is the retry,
    # so the runs are the baseline, one per remedy, the guess and the winners' run
    assert "retried on top of the winners (the combined guess was that run)" in result.stderr
    assert doc["runs"] == 1 + len(doc["trials"]) + 2
    # the diff holds both changes; the user's file is untouched
    assert "-        if mask is None and not torch.compiler.is_compiling():\n+        if mask is None:" in combined["patch"]
    assert "+    return x * x.sum()\n" in combined["patch"]
    assert python_file_hashes(tmp_path) == before and doc["files_unchanged"] is True
