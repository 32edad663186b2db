"""dynscope fix on a program whose stdout moves between plain runs (its time) beside lines that never
move (a print in the compiled function), backend eager (issue 40: "public before private, and no
silent loss"): stdout is compared line by line, so the rewrite that silences the print fails, while
the setting and the rewrite that keep it pass; the change to make is the public setting.
"""

from __future__ import annotations

import json
import shutil

from conftest import REPO, run_dynscope


def test_a_remedy_that_silences_a_stable_line_fails_and_the_public_setting_is_chosen(tmp_path):
    shutil.copy(REPO / "tests" / "programs" / "fix_timed_print.py", tmp_path / "prog.py")
    result = run_dynscope("fix", "--jobs", "2", "--out", "out", "-o", "fix.json", "prog.py", cwd=tmp_path, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    doc = json.loads((tmp_path / "fix.json").read_text())
    assert doc["baseline"]["second_run"]["stdout_differs"] is True  # the time line moved by itself
    rows = {t["remedy_key"].split(":")[0] + ":" + (t.get("rewrite") or {}).get("rule", ""): t for t in doc["trials"]}
    silenced = rows["rewrite:guard-logging"]  # `if not torch.compiler.is_compiling(): print(...)`
    assert silenced["verdict"] == "failed" and silenced["why"] == "the program printed something else", silenced
    assert rows["logging:"]["verdict"] == "fixed" and rows["rewrite:traced-print"]["verdict"] == "fixed", rows
    combined = doc["combined"]
    assert combined["verdict"] == "fixed" and combined["correct"] is True, combined
    assert combined["remedies"] == ["torch._dynamo.config.reorderable_logging_functions.add(print)"], combined
    assert "_higher_order_ops" not in combined["patch"]
