"""fix --patch reads unified diffs as `git diff` and `diff -u` write them, and applies them like `git apply`.

Patches are made by the real tools from real before/after files, then applied in memory and
compared with the after file; what cannot be judged is refused in one line.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from dynscope.fix.unified_diff import PatchError, apply, parse

BEFORE = '''import torch


def forward(x):
    # a comment the rewrite keeps
    y = x * 2
    if y.sum() > 0:
        y = y + 1
    print("done")
    return y


def helper(n):
    return n + 1
'''

AFTER = '''import torch


def forward(x):
    # a comment the rewrite keeps
    y = x * 2
    y = torch.where(y.sum() > 0, y + 1, y)
    return y


def helper(n):
    return n + 2
'''


def _git_diff(tmp_path, before: str, after: str, name: str = "model.py") -> str:
    """`git diff` of a repository whose committed file is ``before`` and working file ``after``."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    if not repo.exists():
        repo.mkdir()
        git(repo, "init", "-q")
    (repo / name).write_text(before, newline="")
    git(repo, "add", name)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "before")
    (repo / name).write_text(after, newline="")
    return git(repo, "diff", "--no-color")


def git(repo, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def _tree(tmp_path, text: str, name: str = "model.py"):
    root = tmp_path / "program"
    root.mkdir(exist_ok=True)
    (root / name).write_text(text, newline="")
    return root


def test_a_git_diff_applies_to_the_same_text_as_git_apply(tmp_path):
    patch = _git_diff(tmp_path, BEFORE, AFTER)
    root = _tree(tmp_path, BEFORE)
    changed, = apply(parse(patch), str(root))
    assert changed.relative == "model.py" and changed.old == BEFORE and changed.new == AFTER
    assert (root / "model.py").read_text() == BEFORE  # nothing written
    # git itself agrees with the result
    (tmp_path / "patch.diff").write_text(patch)
    subprocess.run(["git", "apply", "--check", "--directory=program", "patch.diff"], cwd=tmp_path, check=True,
                   capture_output=True)


def test_a_hunk_found_a_few_lines_from_its_header(tmp_path):
    patch = _git_diff(tmp_path, BEFORE, AFTER)
    root = _tree(tmp_path, "# a line the patch did not know of\n" * 3 + BEFORE)
    changed, = apply(parse(patch), str(root))
    assert changed.new == "# a line the patch did not know of\n" * 3 + AFTER


def test_diff_u_output_and_missing_final_newlines(tmp_path):
    if shutil.which("diff") is None:
        pytest.skip("diff is not installed")
    before, after = BEFORE.rstrip("\n"), AFTER.rstrip("\n") + "\n# end\n"
    (tmp_path / "old.py").write_text(before)
    (tmp_path / "new.py").write_text(after)
    text = subprocess.run(["diff", "-u", "old.py", "new.py"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "\\ No newline at end of file" in text
    text = text.replace("+++ new.py", "+++ model.py", 1)
    changed, = apply(parse(text), str(_tree(tmp_path, before)))
    assert changed.new == after
    # and the other way round: the patch removes the final newline
    back = _git_diff(tmp_path, after, before)
    changed, = apply(parse(back), str(_tree(tmp_path, after)))
    assert changed.new == before


def test_crlf_files_keep_their_line_ends(tmp_path):
    patch = _git_diff(tmp_path, BEFORE, AFTER)
    root = _tree(tmp_path, BEFORE.replace("\n", "\r\n"))
    changed, = apply(parse(patch), str(root))
    assert changed.new == AFTER.replace("\n", "\r\n")


@pytest.mark.parametrize(("patch", "message"), [
    ("hello\n", "no file changes found"),
    ("--- a/../outside.py\n+++ b/../outside.py\n@@ -1 +1 @@\n-x\n+y\n", "is not a plain path inside the program's tree"),
    ("--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-x\n+y\n", "is not a plain path inside the program's tree"),
    ("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x\n", "creating or deleting a file is not supported"),
    ("diff --git a/x.py b/y.py\nrename from x.py\nrename to y.py\n", "is not supported"),
    ("--- a/model.py\n+++ b/model.py\n@@ -1,3 +1,3 @@\n-x\n", "do not add up"),
    ("--- a/model.py\n+++ b/model.py\n", "has a header but no hunk"),
    ("--- a/model.py\n+++ b/model.py\n@@ -1 +1 @@\n-x\n+y\n--- a/model.py\n+++ b/model.py\n@@ -3 +3 @@\n-x\n+y\n",
     "changes the same file in two places"),
])
def test_what_cannot_be_judged_is_one_line(patch, message):
    with pytest.raises(PatchError, match=message) as raised:
        parse(patch, "change.diff")
    assert "\n" not in str(raised.value) and str(raised.value).startswith("change.diff")


def test_a_patch_that_does_not_apply_names_its_hunk(tmp_path):
    patch = _git_diff(tmp_path, BEFORE, AFTER)
    root = _tree(tmp_path, BEFORE.replace("y = x * 2", "y = x * 3"))
    with pytest.raises(PatchError, match=r"change.diff: hunk 1 of model.py does not apply at line \d+"):
        apply(parse(patch, "change.diff"), str(root), "change.diff")


def test_a_link_out_of_the_tree_is_refused(tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text(BEFORE)
    root = tmp_path / "program"
    root.mkdir()
    (root / "model.py").symlink_to(outside)
    patch = _git_diff(tmp_path, BEFORE, AFTER)
    with pytest.raises(PatchError, match="leads outside the program's tree"):
        apply(parse(patch), str(root))
    with pytest.raises(PatchError, match="does not exist under"):
        apply(parse(patch.replace("model.py", "missing.py")), str(root))


def test_a_library_file_named_from_its_package_applies_there(tmp_path):
    # `fix --diff` writes an installed library's changes as <package>/...: --patch finds them in site-packages
    site = tmp_path / "site-packages"
    (site / "lib").mkdir(parents=True)
    (site / "lib" / "model.py").write_text(BEFORE)
    root = tmp_path / "program"
    root.mkdir()
    patch = _git_diff(tmp_path, BEFORE, AFTER).replace("a/model.py", "a/lib/model.py").replace("b/model.py", "b/lib/model.py")
    with pytest.raises(PatchError, match="does not exist under"):
        apply(parse(patch), str(root))
    changed, = apply(parse(patch), str(root), libraries=[str(site)])
    assert changed.new == AFTER and changed.path == str((site / "lib" / "model.py").resolve())
    # the program's own file of that name comes first
    (root / "lib").mkdir()
    (root / "lib" / "model.py").write_text(BEFORE)
    changed, = apply(parse(patch), str(root), libraries=[str(site)])
    assert changed.path == str((root / "lib" / "model.py").resolve())


def test_a_link_out_of_a_library_is_not_followed(tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text(BEFORE)
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "model.py").symlink_to(outside)
    root = tmp_path / "program"
    root.mkdir()
    with pytest.raises(PatchError, match="does not exist under .* or an installed library"):
        apply(parse(_git_diff(tmp_path, BEFORE, AFTER)), str(root), libraries=[str(site)])


def test_a_form_feed_or_a_lone_cr_inside_a_line_is_part_of_it(tmp_path):
    """git splits lines at \\n alone; splitting at every line break Python knows (\\f, \\r, \\x1c, \\u2028...)
    refused a real `git diff` of a file with a page break, and misread the hunk's line counts."""
    before = "import torch\n\x0c\ndef f(x):\n    s = 'a\rb'  # \u2028 kept\n    return x\n"
    after = "import torch\n\x0c\ndef f(x):\n    s = 'a\rB'  # \u2028 kept\n    return x + 1\n"
    root = _tree(tmp_path, before)
    _git_diff(tmp_path, before, after)
    # the diff as git wrote it, bytes for bytes (text=True would turn the \r into a line end)
    diff = subprocess.run(["git", "diff", "--no-color"], cwd=tmp_path / "repo", capture_output=True, check=True).stdout
    changed = apply(parse(diff.decode("utf-8")), str(root))
    assert changed[0].new == after


def test_overlapping_hunks_and_no_newline_abuse_are_one_line_or_git_s_result(tmp_path):
    root = _tree(tmp_path, "a\nb\nc")
    header = "--- a/model.py\n+++ b/model.py\n"
    with pytest.raises(PatchError, match="hunk 2 of model.py does not apply"):  # the second hunk overlaps the first
        apply(parse(header + "@@ -1,2 +1,2 @@\n-a\n+A\n b\n@@ -2,2 +2,2 @@\n-b\n+B\n c\n"), str(root))
    # 100,000 "\ No newline" markers say no more than one does
    many = "\\ No newline at end of file\n" * 100_000
    changed = apply(parse(header + "@@ -2,2 +2,2 @@\n b\n-c\n" + many + "+C\n" + many), str(root))
    assert changed[0].new == "a\nb\nC"


def test_a_hunk_of_added_lines_past_the_end_of_the_file_does_not_apply(tmp_path):
    """It used to land at the end whatever its header said (10**17): judged as git apply would never apply it."""
    root = _tree(tmp_path, "a\n")
    with pytest.raises(PatchError, match="hunk 1 of model.py does not apply at line 100000000000000000"):
        apply(parse(f"--- a/model.py\n+++ b/model.py\n@@ -{10 ** 17},0 +1,1 @@\n+z\n"), str(root))
    changed = apply(parse("--- a/model.py\n+++ b/model.py\n@@ -1,0 +2,1 @@\n+z\n"), str(root))
    assert changed[0].new == "a\nz\n"


def test_two_names_of_one_file_are_refused(tmp_path):
    """model.py and a link to it in the tree: both hunks were read, only the second one's text was served."""
    root = _tree(tmp_path, "a\nb\n")
    (root / "alias.py").symlink_to("model.py")
    patch = ("--- a/model.py\n+++ b/model.py\n@@ -1 +1 @@\n-a\n+A\n"
             "--- a/alias.py\n+++ b/alias.py\n@@ -2 +2 @@\n-b\n+B\n")
    with pytest.raises(PatchError, match="model.py and alias.py are one file"):
        apply(parse(patch), str(root))
