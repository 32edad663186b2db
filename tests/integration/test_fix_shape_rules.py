"""dynscope fix with the rules that match the code's shape (issue 40, item 2) on tests/programs/fix_shapes.py,
backend eager: each break is answered by the rule named on its line, proven in the shadow (break gone, outputs
equal), and the combined change removes every break with equal outputs; the program itself is left as it was.
One fix run (a module fixture).
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from conftest import REPO, python_file_hashes, run_dynscope

PROGRAM = "fix_shapes.py"
RULES = ("assert-to-check", "index-select-comprehension", "clone-repeated-input", "item-where")


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    work = tmp_path_factory.mktemp("shapes")
    shutil.copy(REPO / "tests" / "programs" / PROGRAM, work / PROGRAM)
    before = python_file_hashes(work)
    result = run_dynscope("fix", "--out", "out", "-o", "fix.json", "--diff", "d.diff", "--jobs", "2",
                          PROGRAM, "--backend", "eager", cwd=work, timeout=400)
    assert result.returncode == 0, result.stderr[-4000:]
    return work, json.loads((work / "fix.json").read_text()), before


def test_each_shape_rule_removes_its_break_with_equal_outputs(fixed):
    work, doc, before = fixed
    assert python_file_hashes(work) == before
    lines = (REPO / "tests" / "programs" / PROGRAM).read_text().splitlines()
    marked = {m.group(1): n for n, text in enumerate(lines, 1) if (m := re.search(r"#\s*([a-z]+(?:-[a-z]+)+):", text))}
    assert sorted(marked) == sorted(RULES)
    rows = {t["rewrite"]["rule"]: t for t in doc["trials"] if "rewrite" in t}
    for rule in RULES:
        row = rows[rule]
        assert row["problem"]["line"] == marked[rule], (rule, row["problem"])
        assert row["verdict"] == "fixed" and row["correct"] is True, (rule, row)
    combined = doc["combined"]
    assert combined["verdict"] == "fixed" and combined["correct"] is True and combined["after"]["graph_breaks"] == 0
    assert "torch._assert_async(lengths.max() <= tokens.shape[1]" in combined["patch"]
    assert "list(hidden.index_select(1, kept).unbind(1))" in combined["patch"]
    assert "GatedProduct.apply(picked, mask, mask.clone())" in combined["patch"]
    assert "return torch.where(mixed.mean() > 0, mixed * 2, mixed)" in combined["patch"]
