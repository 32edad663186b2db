"""dynscope fix --patch: someone's change to the source, judged by re-runs without touching a file.

Patches are made by git from real edits of tests/programs/fix_model.py (the script, run as
__main__) and fix_helpers.py (a module it imports), then the working tree is put back: the
patched text exists only in the trial child's memory (dynscope/runner/shadow.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import copy_fix_program, python_file_hashes, run_dynscope

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git makes the patches")


def _git(work: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=work, check=True,
                          capture_output=True, text=True).stdout


def _patch(work: Path, name: str, old: str, new: str, out: str) -> Path:
    path = work / name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    (work / out).write_text(_git(work, "diff", "--no-color", name))
    _git(work, "checkout", "--", name)
    return work / out


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    work = copy_fix_program(tmp_path_factory.mktemp("patch"))
    _git(work, "init", "-q")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "program")
    # keeps the tensor: the .item() break goes, the numbers stay (within the tolerance)
    _patch(work, "fix_model.py", "scale = y.abs().max().item()  # break: .item()", "scale = y.abs().max()", "good.diff")
    # changes what the model computes
    _patch(work, "fix_helpers.py", "SCALE = 2.0", "SCALE = 3.0", "wrong.diff")
    return work


def test_a_patch_is_judged_on_every_problem_and_files_never_change(work):
    before = python_file_hashes(work)
    result = run_dynscope("fix", "--out", "out", "-o", "fix.json", "--jobs", "2", "--patch", "good.diff",
                          "--patch", "wrong.diff", "fix_model.py", cwd=work, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]  # one of the two did not fix or improve
    doc = json.loads((work / "fix.json").read_text())
    good, wrong = (next(t for t in doc["trials"] if t["remedy"] == f"the patch {name}") for name in ("good.diff", "wrong.diff"))
    assert good["applies_as"] == "source" and good["problem"]["kind"] == "any"
    assert good["verdict"] in ("fixed", "improved"), good
    assert good["correct"] is True and good["after"]["graph_breaks"] < doc["baseline"]["graph_breaks"]
    assert "scale = y.abs().max()" in good["patch"]
    assert wrong["verdict"] == "failed" and wrong["correct"] is False and "outputs differ" in wrong["why"]
    # only the patches ran: no remedy of the table was tried
    assert {t["applies_as"] for t in doc["trials"]} == {"source"} and doc["combined"] is None
    assert python_file_hashes(work) == before and doc["files_unchanged"] is True
    assert not list(work.glob("__pycache__/fix_model*"))  # the shadow compiled the changed script in memory


def test_a_patch_that_fixes_exits_0(work):
    result = run_dynscope("fix", "--out", "out-good", "--patch", "good.diff", "fix_model.py", cwd=work, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the patch good.diff" in result.stderr + result.stdout


def test_a_patch_that_does_not_apply_is_one_line(work):
    stale = work / "stale.diff"
    stale.write_text((work / "good.diff").read_text().replace("y = torch.relu(self.proj(x))", "y = torch.tanh(self.proj(x))"))
    result = run_dynscope("fix", "--out", "out-stale", "--patch", "stale.diff", "fix_model.py", cwd=work, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "dynscope: stale.diff: hunk 1 of fix_model.py does not apply at line 18 (its context or removed lines differ "
        "from the file)"], result.stderr
    assert not (work / "out-stale").exists()  # refused before anything ran
