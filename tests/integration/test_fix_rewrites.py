"""dynscope fix rewrites the code in a shadow: examples/source_breaks.py, backend eager.

One fix run (a module fixture, about 45 s on 2 cores) answers it all: each break of the example
(one per catalogue rule that fires in a program this small, the rule named in a comment on or
above its line) is removed by its rule's rewrite, verified (outputs equal), tried in the first
batch beside the settings on the same break; the rewrites merged into one combined run; the
diff written with --diff applies with `git apply` to a copy of the example, and a plain
`dynscope explain` of the patched copy shows the combined run's breaks; the example itself is
byte-identical after the run (no --apply).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES, python_file_hashes, run_dynscope

EXAMPLE = "source_breaks.py"
RULES = ("guard-to-check", "guard-logging", "tensor-where", "tensor-cond", "numpy-int-math", "deepcopy-to-clone",
         "keep-tensor", "drop-requires-grad")


def marked_lines(path: Path) -> dict[str, int]:
    """rule -> the line the example marks with it: a comment on the line, or a comment-only line
    above it (the break torch reports is that line or, for numpy-int-math, the `if` after it)."""
    lines = path.read_text().splitlines()
    marked: dict[str, int] = {}
    for number, text in enumerate(lines, start=1):
        found = re.search(r"#\s*([a-z]+(?:-[a-z]+)+):", text)
        if found:
            marked[found.group(1)] = number + 1 if text.lstrip().startswith("#") else number
    return marked


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    work = tmp_path_factory.mktemp("rewrites")
    shutil.copy(EXAMPLES / EXAMPLE, work / EXAMPLE)
    before = python_file_hashes(work)
    result = run_dynscope("fix", "--out", "out", "-o", "fix.json", "--diff", "d.diff", "--jobs", "2",
                          EXAMPLE, "--backend", "eager", cwd=work, timeout=400)
    assert result.returncode == 0, result.stderr[-4000:]
    return work, json.loads((work / "fix.json").read_text()), result, before


def test_each_break_is_removed_by_its_rewrite_verified(fixed):
    work, doc, _, before = fixed
    assert python_file_hashes(work) == before  # the user's file, byte for byte
    marked = marked_lines(EXAMPLES / EXAMPLE)
    assert sorted(marked) == sorted(RULES)  # the example and this test name the same kinds
    assert doc["baseline"]["graph_breaks"] == len(RULES) and doc["files_unchanged"] is True
    rows = {t["rewrite"]["rule"]: t for t in doc["trials"] if "rewrite" in t}
    for rule in RULES:
        row = rows[rule]
        assert row["applies_as"] == "source" and row["problem"]["line"] in (marked[rule], marked[rule] + 1), (rule, row["problem"])
        assert row["rewrite"]["file"] == EXAMPLE and row["rewrite"]["package"] is None and row["rewrite"]["cause"]
        assert row["verdict"] == "fixed", row
        assert row["correct"] is True and row["max_abs_diff"] == 0.0
        assert row["after"]["count"] == 0 and row["after"]["graph_breaks"] == len(RULES) - 1
        assert row["patch"].startswith(f"--- a/{EXAMPLE}\n+++ b/{EXAMPLE}\n")
    # the .item() break is also fixed by a setting, proven in the same batch; on that tie the
    # combined change takes the rewrite, so the diff alone reproduces the combined run
    setting = [t for t in doc["trials"] if "capture_scalar_outputs" in t["remedy"]]
    assert setting and setting[0]["verdict"] == "fixed" and setting[0]["problem"]["line"] == rows["keep-tensor"]["problem"]["line"]
    combined = doc["combined"]
    assert combined["verdict"] == "fixed" and combined["correct"] is True and combined["problems_left"] == []
    assert combined["after"]["graph_breaks"] == 0 and "conflicts" not in combined
    assert len(combined["remedies"]) == len(RULES) and not any("capture_scalar_outputs" in r for r in combined["remedies"])
    assert "torch.where(y.sum() > 0, y * 2.0, y - 1.0)" in combined["patch"]
    assert "torch.cond(y.mean() > 0, " in combined["patch"] and "math.lcm(a, b)" in combined["patch"]


def test_the_written_diff_applies_and_a_plain_run_shows_the_same_breaks(fixed, tmp_path):
    work, doc, result, _ = fixed
    assert f"wrote {work / 'd.diff'}" in result.stderr.replace("\n", "") or "d.diff" in result.stderr
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(EXAMPLES / EXAMPLE, copy / EXAMPLE)
    applied = subprocess.run(["git", "apply", str(work / "d.diff")], cwd=copy, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    assert (copy / EXAMPLE).read_text() != (EXAMPLES / EXAMPLE).read_text()
    ran = run_dynscope("explain", "-q", "-o", "after.dynscope", EXAMPLE, "--backend", "eager", cwd=copy, timeout=300)
    assert ran.returncode == 0, ran.stderr[-4000:]
    summary = run_dynscope("summary", "--json", "after.dynscope", cwd=copy)
    assert summary.returncode == 0, summary.stderr
    totals = json.loads(summary.stdout)["totals"]
    assert totals["graph_breaks"] == doc["combined"]["after"]["graph_breaks"] == 0


def test_apply_goes_with_the_rewrites_not_with_a_patch(tmp_path):
    (tmp_path / "p.diff").write_text("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    shutil.copy(EXAMPLES / EXAMPLE, tmp_path / EXAMPLE)
    result = run_dynscope("fix", "--apply", "--patch", "p.diff", EXAMPLE, cwd=tmp_path, timeout=60)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "--diff and --apply write fix's own verified rewrites" in result.stderr
