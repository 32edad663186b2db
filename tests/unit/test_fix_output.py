"""fix's output as printed: the table fits the terminal, the change is printed as whole diff lines,
diff paths are named from where the user stands, and a baseline that fails on its own is said first."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from dynscope.analysis.fix_document import Baseline, Combined, FixDocument, Measured, ProblemRow, TrialRow
from dynscope.analysis.fix_verdict import Metrics
from dynscope.analysis.source_edits import SourceEdit, SourceFile
from dynscope.fix import write_changes
from dynscope.fix.baseline_check import BaselineFailed, check_baseline, last_lines
from dynscope.reporters.fix_table import render_fix

LONG = "x" * 30
OLD = f"def forward(x):\n    y = x.sin()  # {LONG} a comment long enough to pass the 80th column {LONG}\n    return y\n"
NEW = OLD.replace("x.sin()", "x.cos()")


def _doc(tmp_path: Path) -> FixDocument:
    (tmp_path / "pkg").mkdir(exist_ok=True)
    path = tmp_path / "pkg" / "model.py"
    path.write_text(OLD)
    edit = SourceEdit(SourceFile(str(path), OLD, "model.py"), NEW)
    before = Metrics(4, 3, 0, 0.6, 0.2, 5)
    after = Metrics(0, 0, 0, 0.5, 0.2, 1)
    rows = tuple(
        TrialRow(ProblemRow("break", str(path), 2, "forward", f"Unsupported Tensor.item() call {LONG} number {i}", 1),
                 f"torch._dynamo.config.some_rather_long_setting_name_{i} = True", f"k{i}", "config", "",
                 Measured(before, 1), verdict, "", Measured(after, 0), True)
        for i, verdict in enumerate(("fixed", "failed", "no change")))
    patch = "import torch\n\n" + edit.diff()
    return FixDocument(("model.py",), str(tmp_path), "2.13.0", "/o", Baseline(before, 0, "/o/b", 1.0), (), rows,
                       Combined(("a", "b"), patch, True, "fixed", "", after, True, edits=(edit,)),
                       4, 1, 60.0, 3.0, True, "/dev/null", True, True, False, 1e-5, 1e-5)


def _printed(doc: FixDocument, width: int) -> str:
    out = io.StringIO()
    render_fix(doc, Console(file=out, width=width, no_color=True, force_terminal=False))
    return out.getvalue()


@pytest.mark.parametrize("width", [60, 80, 100])
def test_narrow_output_fits_and_prints_every_diff_line_whole(tmp_path, width):
    doc = _doc(tmp_path)
    text = _printed(doc, width)
    lines = text.splitlines()
    diff_lines = doc.combined.patch.rstrip("\n").split("\n")
    start = lines.index("The change to make (verified together in one run):") + 1
    assert lines[start:start + len(diff_lines)] == diff_lines  # raw, whole, in order, however wide
    assert any(len(line) > width for line in diff_lines)  # (the case the check is for)
    before_diff = lines[:start]
    # everything but the header's two prose lines (soft-wrapped by the terminal) fits the width
    assert all(len(line) <= width for line in before_diff[2:]), [x for x in before_diff if len(x) > width]
    for i in range(3):  # every remedy and its numbers shown: one block per remedy
        assert f"some_rather_long_setting_name_{i}" in text.replace("\n", "")
    assert "4 → 0" in text


def test_wide_output_keeps_the_table(tmp_path):
    text = _printed(_doc(tmp_path), 200)
    assert "┃ problem" in text or "│ problem" in text or "problem " in text.splitlines()[3]
    assert max(len(x) for x in text.splitlines() if not x.startswith(("+", "-", " "))) <= 200


def test_diff_paths_from_the_repository_root(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    doc = _doc(repo)
    assert write_changes.diff_base(str(repo / "pkg")) == str(repo.resolve()) or \
        os.path.samefile(write_changes.diff_base(str(repo / "pkg")), repo)
    moved = write_changes.rebased(doc, str(repo))
    assert "--- a/pkg/model.py\n+++ b/pkg/model.py\n" in moved.combined.patch
    assert moved.combined.patch.startswith("import torch\n\n")
    assert moved.combined.edits[0].file.shown == "pkg/model.py"
    (repo / "fix.diff").write_text(write_changes.diff_files(str(repo / "fix.diff"), moved.combined.edits)[0].text)
    subprocess.run(["git", "apply", "fix.diff"], cwd=repo, check=True)
    assert (repo / "pkg" / "model.py").read_text() == NEW


def test_a_file_outside_the_base_keeps_its_name_in_the_programs_tree(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    doc = _doc(tmp_path / "elsewhere")
    (tmp_path / "here").mkdir()
    moved = write_changes.rebased(doc, str(tmp_path / "here"))
    assert moved.combined.edits[0].file.shown == "model.py" and moved.combined.patch == doc.combined.patch


def test_outside_a_repository_the_current_directory(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    env_ceiling = os.environ.get("GIT_CEILING_DIRECTORIES")
    os.environ["GIT_CEILING_DIRECTORIES"] = str(tmp_path)
    try:
        assert write_changes.diff_base(str(plain)) == str(plain)
    finally:
        if env_ceiling is None:
            del os.environ["GIT_CEILING_DIRECTORIES"]
        else:
            os.environ["GIT_CEILING_DIRECTORIES"] = env_ceiling


def test_diff_to_stdout(tmp_path, capsys):
    doc = _doc(tmp_path)
    files = write_changes.diff_files(write_changes.STDOUT, doc.combined.edits)
    write_changes.write_diffs(files)
    assert capsys.readouterr().out == doc.combined.edits[0].diff()


@pytest.mark.parametrize(("exit_code", "compiled", "error_problem", "fails"), [
    (0, True, False, False),  # a run that compiled: fix's case
    (1, True, True, False),  # a compile error: fix's case too
    (2, False, False, True),  # argparse's error before anything compiled
    (0, False, False, True),  # no torch.compile at all
    (1, True, False, True),  # an error of the program's own after compiling
])
def test_a_baseline_fix_cannot_work_from(tmp_path, exit_code, compiled, error_problem, fails):
    stderr = tmp_path / "baseline.stderr"
    stderr.write_text("usage: prog.py [-h]\nprog.py: error: unrecognized arguments: --diff\n")
    if not fails:
        check_baseline(exit_code, compiled, error_problem, str(stderr))
        return
    with pytest.raises(BaselineFailed) as raised:
        check_baseline(exit_code, compiled, error_problem, str(stderr))
    assert raised.value.exit_code == 2
    assert raised.value.last_lines[-1] == "prog.py: error: unrecognized arguments: --diff"
    assert str(stderr) in str(raised.value)


def test_last_lines_reads_only_the_end(tmp_path):
    path = tmp_path / "log"
    path.write_text("".join(f"line {i}\n" for i in range(100_000)))
    assert last_lines(str(path), 3) == ("line 99997", "line 99998", "line 99999")
    assert last_lines(str(tmp_path / "missing")) == ()
