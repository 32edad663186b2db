"""Source rewrites as fix's remedies, without torch: the table's entry with a reader, the files
a reader may read, merging rewrites of one file, "moved to eager", --diff's files and --apply."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dynscope.analysis.fix_document import RewriteNote
from dynscope.analysis.fix_problems import ProblemKey
from dynscope.analysis.fix_verdict import Metrics, Verdict, moved_to_eager
from dynscope.analysis.remedies import BreakFacts, FixProblem, remedies_for, select
from dynscope.analysis.remedy_patches import private_names
from dynscope.analysis.source_edits import SourceEdit, SourceFile, merge
from dynscope.errors import DynscopeError
from dynscope.events import ChangeSource, action_from_json
from dynscope.fix import unified_diff, write_changes
from dynscope.fix.combine import combine
from dynscope.fix.source_reader import reader_for
from dynscope.model.fix import Features

PROGRAM = '''import logging

import torch

log = logging.getLogger(__name__)


def forward(x):
    y = x + 1
    log.info("y is ready")
    z = y * 2
    log.debug("z is ready")
    return z
'''

FEATURES = Features(functions=frozenset({"reorderable_logging_functions", "compiler_disable"}), program_root="/p")


def _break(path: str, line: int) -> FixProblem:
    facts = BreakFacts("logging.Logger method not supported for non-export cases",
                       "logging.Logger methods are not supported for non-export cases.", (), "log.info(...)")
    return FixProblem("graph_break", ProblemKey("break", "logging", path, line), path, line, "forward", "logging", 1, facts)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "prog").mkdir()
    (tmp_path / "prog" / "model.py").write_text(PROGRAM)
    return tmp_path


def test_a_break_in_the_programs_file_gets_its_rewrite_as_a_source_remedy(tree: Path):
    path = str(tree / "prog" / "model.py")
    [remedy] = remedies_for(_break(path, 10), FEATURES, reader_for(str(tree / "prog"), libraries=[]))
    assert remedy.applies_as == "source" and remedy.rule == "guard-logging"
    assert not remedy.fallback  # tried in the first batch, beside the settings on the same break
    assert remedy.key == "rewrite:guard-logging:model.py:10"
    assert "(model.py)" in remedy.title and " in " not in remedy.title.split("(")[0][-4:]
    assert isinstance(remedy.action, ChangeSource) and remedy.action.files[0][0] == os.path.realpath(path)
    assert action_from_json(remedy.action.to_json()) == remedy.action  # it travels to the trial child
    assert "    if not torch.compiler.is_compiling():\n        log.info" in remedy.action.files[0][1]
    # the patch is a diff `git apply` takes in the program's tree: our own reader of diffs applies it there
    assert remedy.patch.startswith("--- a/model.py\n+++ b/model.py\n")
    [changed] = unified_diff.apply(unified_diff.parse(remedy.patch), str(tree / "prog"))
    assert changed.new == remedy.action.files[0][1]
    assert RewriteNote.of(remedy) == RewriteNote("guard-logging", remedy.cause or "", "model.py", None, None)
    assert (tree / "prog" / "model.py").read_text() == PROGRAM  # nothing written


def test_without_a_reader_or_outside_the_tree_there_is_no_rewrite(tree: Path):
    path = str(tree / "prog" / "model.py")
    assert not [r for r in remedies_for(_break(path, 10), FEATURES) if r.applies_as == "source"]
    elsewhere = reader_for(str(tree / "other"), libraries=[])
    assert not [r for r in remedies_for(_break(path, 10), FEATURES, elsewhere) if r.applies_as == "source"]
    assert not remedies_for(_break(path, 9), FEATURES, reader_for(str(tree / "prog"), libraries=[]))  # y = x + 1


def test_a_library_file_is_rewritten_where_it_is_and_named_by_its_package(tree: Path):
    site = tree / "site-packages"
    (site / "somelib" / "models").mkdir(parents=True)
    lib_file = site / "somelib" / "models" / "net.py"
    lib_file.write_text(PROGRAM)
    (site / "torch").mkdir()
    (site / "torch" / "x.py").write_text(PROGRAM)
    read = reader_for(str(tree / "prog"), libraries=[str(site)])
    source = read(str(lib_file))
    assert source is not None and source.shown == "somelib/models/net.py" and source.package == "somelib"
    assert read(str(site / "torch" / "x.py")) is None  # the compiler itself is never the program
    [remedy] = [r for r in remedies_for(_break(str(lib_file), 10), FEATURES, read) if r.applies_as == "source"]
    assert " in somelib (net.py)" in remedy.title
    assert remedy.patch.startswith("--- a/somelib/models/net.py\n")


def test_select_keys_each_rewrite_by_rule_file_and_line(tree: Path):
    path = str(tree / "prog" / "model.py")
    read = reader_for(str(tree / "prog"), libraries=[])
    chosen = select([_break(path, 10), _break(path, 12)], FEATURES, read=read)
    keys = [r.key for r, _ in chosen if r.applies_as == "source"]
    assert keys == ["rewrite:guard-logging:model.py:10", "rewrite:guard-logging:model.py:12"]


def _file(text: str, shown: str = "m.py", path: str = "/p/m.py") -> SourceFile:
    return SourceFile(path, text, shown)


def test_rewrites_of_one_file_merge_and_a_conflict_keeps_the_first():
    base = _file("import torch\na = 1\nb = 2\nc = 3\n")
    first = SourceEdit(base, "import torch\na = 10\nb = 2\nc = 3\n")
    second = SourceEdit(base, "import torch\na = 1\nb = 2\nc = 30\n")
    clash = SourceEdit(base, "import torch\na = 11\nb = 2\nc = 3\n")
    merged = merge([first, clash, second], ["first", "clash", "second"])
    assert merged.kept == (0, 2)
    assert [e.new for e in merged.edits] == ["import torch\na = 10\nb = 2\nc = 30\n"]
    assert len(merged.conflicts) == 1 and merged.conflicts[0].startswith("clash: changes line 2 of m.py")


def test_the_same_change_made_by_two_rewrites_is_made_once():
    base = _file("a = 1\nb = 2\n")
    one = SourceEdit(base, "import torch\na = 1\nb = 2\n")
    two = SourceEdit(base, "import torch\na = 1\nb = 20\n")
    merged = merge([one, two])
    assert merged.kept == (0, 1) and merged.edits[0].new == "import torch\na = 1\nb = 20\n"


def test_a_diff_of_a_file_without_a_last_newline_applies():
    edit = SourceEdit(_file("a = 1\nb = 2"), "a = 1\nb = 3")
    assert "\\ No newline at end of file" in edit.diff()
    patch = unified_diff.parse(edit.diff())
    assert unified_diff._apply_hunks(edit.old, patch[0], "p") == edit.new


def test_the_combined_change_holds_one_text_per_file(tree: Path):
    path = str(tree / "prog" / "model.py")
    read = reader_for(str(tree / "prog"), libraries=[])
    remedies = [r for p in (_break(path, 10), _break(path, 12)) for r in remedies_for(p, FEATURES, read)
                if r.applies_as == "source"]
    change = combine(remedies)
    [action] = change.actions
    assert isinstance(action, ChangeSource) and len(action.files) == 1
    text = action.files[0][1]
    assert text.count("if not torch.compiler.is_compiling():") == 2 and change.conflicts == ()


M = Metrics(2, 0, 0, 1.0, 1.0, graphs=3)


def test_a_break_that_vanishes_while_the_graphs_stay_is_moved_to_eager():
    fixed = Verdict("fixed", True, 0.0, "the problem is gone, nothing new, outputs equal")
    assert moved_to_eager(fixed, M, Metrics(1, 0, 0, 1.0, 1.0, graphs=3), True).verdict == "moved to eager"
    assert moved_to_eager(fixed, M, Metrics(1, 0, 0, 1.0, 1.0, graphs=2), True) == fixed  # fewer graphs: fixed
    assert moved_to_eager(fixed, M, Metrics(1, 0, 0, 1.0, 1.0), True) == fixed  # not measured: as judged
    # torch.compiler.disable: its target gone, a break of its own at the call: improved, yet moved to eager
    improved = Verdict("improved", True, 0.0, "the problem is gone; but new: break Skip calling")
    assert moved_to_eager(improved, M, Metrics(2, 0, 0, 1.0, 1.0, graphs=4), True).verdict == "moved to eager"
    assert moved_to_eager(improved, M, Metrics(1, 0, 0, 1.0, 1.0, graphs=3), False) == improved  # only fewer
    failed = Verdict("failed", False, 1.0, "outputs differ")
    assert moved_to_eager(failed, M, Metrics(1, 0, 0, 1.0, 1.0, graphs=3), True) == failed


def test_diff_files_put_each_library_in_its_own_diff(tmp_path: Path):
    own = SourceEdit(SourceFile("/p/m.py", "a\n", "m.py"), "b\n")
    lib = SourceEdit(SourceFile("/s/transformers/x.py", "a\n", "transformers/x.py", "transformers", "5.24.0"), "b\n")
    files = write_changes.diff_files(str(tmp_path / "d.diff"), [own, lib])
    assert [(os.path.basename(f.path), f.what) for f in files] == [("d.diff", "the program's files"),
                                                                   ("transformers-5.24.0.diff", "transformers 5.24.0")]
    assert files[1].text.startswith("--- a/transformers/x.py\n")


def test_apply_writes_only_the_programs_files_and_keeps_a_backup(tree: Path):
    path = tree / "prog" / "model.py"
    mine = SourceEdit(SourceFile(str(path), PROGRAM, "model.py"), PROGRAM.replace("x + 1", "x + 2"))
    lib = SourceEdit(SourceFile(str(tree / "lib.py"), "a\n", "lib/lib.py", "lib", "1"), "b\n")
    outside = SourceEdit(SourceFile(str(tree / "elsewhere.py"), "a\n", "../elsewhere.py"), "b\n")
    todo, left = write_changes.applicable([mine, lib, outside], str(tree / "prog"))
    assert todo == [mine] and len(left) == 2 and "installed package lib 1" in left[0]
    assert write_changes.apply_edits(todo) == ["model.py"]
    assert path.read_text() == mine.new and (tree / "prog" / "model.py.orig").read_text() == PROGRAM
    with pytest.raises(DynscopeError, match="changed since fix read it"):
        write_changes.apply_edits(todo)  # the file is not the text the runs read any more


def test_lines_of_changed_text_map_back_to_the_files_lines():
    from dynscope.analysis.source_edits import line_map

    old = "a\nlog()\nb\nc\n"
    new = "a\nif x:\n    log()\nb\nc\n"
    assert line_map(old, new) == {1: 1, 2: 2, 3: 2, 4: 3, 5: 4}


def _doc_with(combined):
    from dynscope.analysis.fix_document import Baseline, FixDocument

    return FixDocument(("m.py",), "/p", None, "/out", Baseline(None, 0, "b", None), (), (), combined, 1, 1, 1.0, 1.0,
                       True, "/dev/null", True, True, False, 1e-5, 1e-5)


def test_fix_apply_shows_the_change_then_writes_it_and_diff_writes_the_files(tree: Path):
    import argparse
    import io

    from rich.console import Console

    from dynscope.analysis.fix_document import Combined
    from dynscope.commands.fix import _write_changes

    path = tree / "prog" / "model.py"
    edit = SourceEdit(SourceFile(str(path), PROGRAM, "model.py"), PROGRAM.replace("x + 1", "x + 2"))
    out = io.StringIO()
    console = Console(file=out, width=200)
    unverified = Combined(("r",), "p", True, "failed", "outputs differ", correct=False, edits=(edit,))
    args = argparse.Namespace(diff=str(tree / "d.diff"), apply=True, capture=None)
    _write_changes(_doc_with(unverified), args, console, str(tree / "prog"))
    assert "nothing written" in out.getvalue() and not (tree / "d.diff").exists() and path.read_text() == PROGRAM
    verified = Combined(("r",), "p", True, "fixed", "gone", correct=True, edits=(edit,),
                        settings=("torch._dynamo.config.capture_scalar_outputs = True",))
    _write_changes(_doc_with(verified), args, console, str(tree / "prog"))
    shown = out.getvalue()
    assert shown.index("-    y = x + 1") < shown.index("changed model.py")  # the diff is shown before it is written
    assert "capture_scalar_outputs = True" in shown
    assert (tree / "d.diff").read_text() == edit.diff() and path.read_text() == edit.new
    assert (tree / "prog" / "model.py.orig").read_text() == PROGRAM


PRINTING = '''import torch


def forward(x):
    y = x + 1
    print("normalized")
    return y * 2
'''


def test_a_change_through_a_private_torch_module_is_marked_private(tmp_path: Path):
    """The print break of tests/programs/fix_model.py: the rewrite that guards the print uses public
    API, the one that prints through torch._higher_order_ops.print a private module."""
    (tmp_path / "prog").mkdir()
    path = tmp_path / "prog" / "model.py"
    path.write_text(PRINTING)
    facts = BreakFacts("Failed to trace builtin operator", "Dynamo does not know how to trace builtin operator `print`",
                       (), 'print("normalized")')
    problem = FixProblem("graph_break", ProblemKey("break", "print", str(path), 6), str(path), 6, "forward", "print", 1,
                         facts)
    features = Features(functions=frozenset({"reorderable_logging_functions"}), program_root=str(tmp_path / "prog"))
    remedies = {r.key.split(":")[0] + ":" + (r.rule or ""): r
                for r in remedies_for(problem, features, reader_for(str(tmp_path / "prog"), libraries=[]))}
    assert remedies["rewrite:traced-print"].private == ("torch._higher_order_ops.print",)
    assert remedies["rewrite:guard-logging"].private == ()
    assert remedies["logging:"].private == ()  # the setting reorderable_logging_functions: public


def test_private_names_are_read_from_the_lines_a_diff_adds():
    diff = ("--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,3 @@\n-    torch._higher_order_ops.print('{}', 1)\n"
            "+    torch._check(n > 0)\n+    torch._dynamo.config.capture_scalar_outputs = True\n"
            "+    torch._assert_async(t); torch._dynamo.is_compiling()\n")
    assert private_names(diff) == ("torch._dynamo.is_compiling",)  # a removed line is not written
