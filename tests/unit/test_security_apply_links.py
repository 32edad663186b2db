"""``fix --apply`` and ``--diff`` never write through a name a stranger planted in the program's tree.

Found reading the code for issue 39: --apply wrote the new text to ``FILE.dynscope-new`` with a plain
open, so a tree (a cloned repository) holding ``train.py.dynscope-new`` as a link to ``~/.bashrc`` got
the rewritten train.py, the attacker's own text, written into ``~/.bashrc``, and train.py replaced
by the link; ``--diff``'s ``<package>-<version>.diff`` beside it was written through a link the same way.
"""

from __future__ import annotations

import os

import pytest

from dynscope.analysis.source_edits import SourceEdit, SourceFile
from dynscope.errors import DynscopeError
from dynscope.fix.write_changes import DiffFile, apply_edits, write_diffs


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "tree").mkdir()
    (tmp_path / "victim").write_text("precious\n")
    (tmp_path / "tree" / "train.py").write_text("x = 1\n")
    os.chmod(tmp_path / "tree" / "train.py", 0o640)
    return tmp_path


def edit(tree) -> SourceEdit:
    return SourceEdit(SourceFile(str(tree / "tree" / "train.py"), "x = 1\n", "train.py"), "x = 2  # the rewrite\n")


def test_apply_never_writes_through_a_planted_temporary_name(tree):
    os.symlink(tree / "victim", tree / "tree" / "train.py.dynscope-new")
    os.symlink(tree / "victim", tree / "tree" / ".train.py.dynscope-new")
    assert apply_edits([edit(tree)]) == ["train.py"]
    assert (tree / "victim").read_text() == "precious\n"
    train = tree / "tree" / "train.py"
    assert not train.is_symlink() and train.read_text() == "x = 2  # the rewrite\n"
    assert (tree / "tree" / "train.py.orig").read_text() == "x = 1\n"
    assert os.stat(train).st_mode & 0o777 == 0o640  # the file keeps its mode
    left = sorted(p.name for p in (tree / "tree").iterdir())
    assert left == [".train.py.dynscope-new", "train.py", "train.py.dynscope-new", "train.py.orig"]  # no temporary left


def test_apply_refuses_a_planted_orig_link_and_writes_nothing(tree):
    os.symlink(tree / "victim", tree / "tree" / "train.py.orig")
    with pytest.raises(DynscopeError, match="train.py.orig exists"):
        apply_edits([edit(tree)])
    assert (tree / "victim").read_text() == "precious\n"
    assert (tree / "tree" / "train.py").read_text() == "x = 1\n"


def test_apply_refuses_a_fifo_swapped_in_for_the_file(tree):
    os.unlink(tree / "tree" / "train.py")
    os.mkfifo(tree / "tree" / "train.py")
    with pytest.raises(DynscopeError, match="cannot read train.py: it is a FIFO"):
        apply_edits([edit(tree)])


def test_a_diff_is_never_written_through_a_link(tree):
    planted = tree / "tree" / "transformers-5.24.0.diff"
    os.symlink(tree / "victim", planted)
    with pytest.raises(DynscopeError, match="it is a symbolic link"):
        write_diffs([DiffFile(str(planted), "--- a/x\n+++ b/x\n", "transformers 5.24.0")])
    assert (tree / "victim").read_text() == "precious\n"
    plain = tree / "tree" / "fix.diff"
    write_diffs([DiffFile(str(plain), "the diff\n", "the program's files")])
    write_diffs([DiffFile(str(plain), "shorter\n", "the program's files")])  # an existing file is replaced
    assert plain.read_text() == "shorter\n"
