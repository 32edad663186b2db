"""fix --patch (and MCP judge_patch, which runs it) refuses patches to files a trial cannot judge:
torch's and dynscope's own code, .pth and start-up files, non-source files of installed packages;
and fix --apply never writes through a link planted in the program's tree (no torch here)."""

from __future__ import annotations

import difflib
import importlib.util
import os
from pathlib import Path

import pytest

from dynscope.analysis.source_edits import SourceEdit, SourceFile
from dynscope.commands import main
from dynscope.errors import DynscopeError
from dynscope.fix import write_changes
from dynscope.fix.patch_targets import EXIT_CODE, check_targets, refusal


def _diff(relative: str, old: str) -> str:
    lines = old.splitlines(keepends=True)
    return "".join(difflib.unified_diff(lines, ["import os\n", *lines], f"a/{relative}", f"b/{relative}"))


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A forged site-packages: torch, a library, a .pth file and start-up files."""
    site = tmp_path / "site-packages"
    for name in ("torch/_dynamo/eval_frame.py", "torchgen/gen.py", "transformers/models/x.py", "pkg/data.json",
                 "pkg/_ext.so", "evil.pth", "sitecustomize.py", "dynscope/__init__.py"):
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text("x = 1\n")
    return site


def test_refused_targets_and_why(site: Path, tmp_path: Path):
    protected = [("torch", str(site / "torch"))]
    libs = [str(site)]
    why = {name: refusal(str(site / name), protected, libs) for name in
           ("torch/_dynamo/eval_frame.py", "torchgen/gen.py", "dynscope/__init__.py", "evil.pth", "sitecustomize.py",
            "pkg/data.json", "pkg/_ext.so", "transformers/models/x.py")}
    assert "torch's own code" in why["torch/_dynamo/eval_frame.py"]
    assert "torchgen's own code" in why["torchgen/gen.py"] and "dynscope's own code" in why["dynscope/__init__.py"]
    assert "a .pth file is run by Python at start-up" in why["evil.pth"]
    assert "sitecustomize.py is run by Python at start-up" in why["sitecustomize.py"]
    assert "only the .py source" in why["pkg/data.json"] and "only the .py source" in why["pkg/_ext.so"]
    assert why["transformers/models/x.py"] is None  # a library's source: judged, as fix --diff names it
    # torch wherever it is installed (a checkout inside the program's tree), and .pth files anywhere
    tree = tmp_path / "proj"
    (tree / "vendor" / "torch").mkdir(parents=True)
    assert refusal(str(tree / "vendor" / "torch" / "a.py"), [("torch", str(tree / "vendor" / "torch"))], libs)
    assert refusal(str(tree / "x.pth"), [], libs) and refusal(str(tree / "model.py"), [], libs) is None
    # another virtualenv inside the program's tree: its torch is torch all the same
    other_venv = tree / ".venv" / "lib" / "python3.11" / "site-packages"
    assert "torch's own code" in refusal(str(other_venv / "torch" / "nn" / "m.py"), [], libs)
    assert refusal(str(other_venv / "transformers" / "m.py"), [], libs) is None
    with pytest.raises(DynscopeError) as e:
        check_targets([(str(site / "evil.pth"), "evil.pth")], "my.diff", libs)
    assert e.value.exit_code == EXIT_CODE == 2 and str(e.value).startswith("my.diff: refusing to judge a change to evil.pth")


def _run_fix(tree: Path, patch: Path, capsys) -> tuple[int, str]:
    before = sorted(p.name for p in tree.iterdir())
    cwd = os.getcwd()
    os.chdir(tree)
    try:
        code = main(["fix", "--patch", str(patch), "prog.py"])
    finally:
        os.chdir(cwd)
    assert sorted(p.name for p in tree.iterdir()) == before  # no run directory, nothing written
    return code, capsys.readouterr().err


def test_fix_patch_refuses_a_pth_file_in_one_line_before_anything_runs(tmp_path: Path, capsys):
    tree = tmp_path / "proj"
    tree.mkdir()
    (tree / "prog.py").write_text("print(1)\n")
    (tree / "boot.pth").write_text("import sys\n")
    patch = tmp_path / "p.diff"
    patch.write_text(_diff("boot.pth", "import sys\n"))
    code, err = _run_fix(tree, patch, capsys)
    assert code == 2 and err.count("\n") == 1 and "a .pth file is run by Python at start-up" in err
    assert (tree / "boot.pth").read_text() == "import sys\n"


def test_fix_patch_refuses_torchs_own_files(tmp_path: Path, capsys):
    spec = importlib.util.find_spec("torch")  # found, not imported
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    target = Path(spec.submodule_search_locations[0]) / "_dynamo" / "eval_frame.py"
    tree = tmp_path / "proj"
    tree.mkdir()
    (tree / "prog.py").write_text("print(1)\n")
    patch = tmp_path / "p.diff"
    patch.write_text(_diff("torch/_dynamo/eval_frame.py", target.read_text()))
    code, err = _run_fix(tree, patch, capsys)
    assert code == 2 and err.count("\n") == 1
    assert "refusing to judge a change to torch/_dynamo/eval_frame.py: it is torch's own code" in err


@pytest.mark.parametrize("path", ["../outside.py", "/etc/passwd", "a/../../outside.py", "sub/../../outside.py"])
def test_fix_patch_paths_that_escape_the_tree_are_refused(tmp_path: Path, capsys, path):
    tree = tmp_path / "proj"
    tree.mkdir()
    (tree / "prog.py").write_text("print(1)\n")
    (tmp_path / "outside.py").write_text("x = 1\n")
    patch = tmp_path / "p.diff"
    patch.write_text(f"--- {path}\n+++ {path}\n@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    code, err = _run_fix(tree, patch, capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert (tmp_path / "outside.py").read_text() == "x = 1\n"


def test_apply_never_writes_through_a_link_planted_in_the_tree(tmp_path: Path):
    tree = tmp_path / "prog"
    tree.mkdir()
    path = tree / "model.py"
    path.write_text("y = x + 1\n")
    victim = tmp_path / "bashrc"
    victim.write_text("mine\n")
    # the old temporary name, planted as a link: the new text went through it into the victim
    (tree / "model.py.dynscope-new").symlink_to(victim)
    edit = SourceEdit(SourceFile(str(path), "y = x + 1\n", "model.py"), "y = x + 2\n")
    todo, left = write_changes.applicable([edit], str(tree))
    assert write_changes.apply_edits(todo) == ["model.py"] and left == []
    assert victim.read_text() == "mine\n" and path.read_text() == "y = x + 2\n" and not path.is_symlink()
    assert (tree / "model.py.orig").read_text() == "y = x + 1\n"
    assert sorted(p.name for p in tree.iterdir()) == ["model.py", "model.py.dynscope-new", "model.py.orig"]
    # a planted FILE.orig link: refused, nothing written anywhere
    (tree / "model.py.orig").unlink()
    (tree / "model.py.orig").symlink_to(victim)
    edit2 = SourceEdit(SourceFile(str(path), "y = x + 2\n", "model.py"), "y = x + 3\n")
    with pytest.raises(DynscopeError, match="model.py.orig exists"):
        write_changes.apply_edits([edit2])
    assert victim.read_text() == "mine\n" and path.read_text() == "y = x + 2\n"


def test_apply_leaves_a_file_whose_link_leads_out_of_the_tree(tmp_path: Path):
    tree = tmp_path / "prog"
    tree.mkdir()
    outside = tmp_path / "shared.py"
    outside.write_text("a\n")
    (tree / "linked.py").symlink_to(outside)
    # the reader names files by their real path: the link's target is outside the tree
    edit = SourceEdit(SourceFile(os.path.realpath(tree / "linked.py"), "a\n", "linked.py"), "b\n")
    todo, left = write_changes.applicable([edit], str(tree))
    assert todo == [] and "outside the program's tree" in left[0]
    assert outside.read_text() == "a\n"


def test_diff_files_never_write_through_a_planted_link_or_into_a_fifo(tmp_path: Path):
    own = SourceEdit(SourceFile("/p/m.py", "a\n", "m.py"), "b\n")
    lib = SourceEdit(SourceFile("/s/transformers/x.py", "a\n", "transformers/x.py", "transformers", "5.24.0"), "b\n")
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "bashrc"
    victim.write_text("mine\n")
    (out / "transformers-5.24.0.diff").symlink_to(victim)  # a name dynscope makes up, planted beside --diff
    files = write_changes.diff_files(str(out / "d.diff"), [own, lib])
    with pytest.raises(DynscopeError, match="cannot write .*transformers-5.24.0.diff"):
        write_changes.write_diffs(files)
    assert victim.read_text() == "mine\n"
    (out / "transformers-5.24.0.diff").unlink()
    (out / "d.diff").unlink()  # written before the library's diff was refused
    os.mkfifo(out / "d.diff")  # opened without blocking: refused at once, never waits for a reader
    with pytest.raises(DynscopeError, match="cannot write .*d.diff"):
        write_changes.write_diffs(files)
    (out / "d.diff").unlink()
    write_changes.write_diffs(files)
    assert (out / "d.diff").read_text().startswith("--- a/m.py") and (out / "transformers-5.24.0.diff").is_file()
