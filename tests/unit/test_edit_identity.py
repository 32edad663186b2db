"""The edit corpus (tests/edit_corpus.py, issue 41) on its recorded captures: a harmless edit
reports no new or gone break, recompile or error; an edit that adds breaks has each found.

The captures are tests/data/edits/captures/<torch version>/, written by tests/data/edits/record.sh.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from edit_corpus import MARK, PROGRAMS, Edit, Program, capture_name

from dynscope.analysis.changes import comparison_lines
from dynscope.analysis.compare import compare
from dynscope.commands import main
from dynscope.model import Capture

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "edits" / "captures"
VERSIONS = sorted(p for p in CAPTURES.iterdir() if p.is_dir()) if CAPTURES.is_dir() else []
CASES = [(folder, program, edit) for folder in VERSIONS for program in PROGRAMS for edit in program.edits]


def case_id(case: tuple[Path, Program, Edit]) -> str:
    folder, program, edit = case
    return f"{folder.name}-{program.name}-{edit.name}"


@pytest.fixture(params=CASES, ids=[case_id(c) for c in CASES])
def comparison(request):
    folder, program, edit = request.param
    with Capture.open(str(folder / capture_name(program, None))) as before, \
            Capture.open(str(folder / capture_name(program, edit))) as after:
        assert before.graph_breaks() or before.recompiles(), "the base version must have something to match"
        yield program, edit, compare(before, after)


def test_the_corpus_is_recorded():
    assert VERSIONS, "record it: tests/data/edits/record.sh"
    assert sum(p.real_model for p in PROGRAMS) >= 2 and len(PROGRAMS) >= 5


def test_an_edit_reports_only_what_it_changed(comparison):
    program, edit, result = comparison
    shown = "\n".join(comparison_lines(result))
    assert not result.errors_added and not result.errors_removed, shown
    if not edit.adds:  # (a new break may move recompiles into the frame that resumes after it)
        assert not result.recompiles_added and not result.recompiles_removed, shown
    if edit.adds:  # every break the edit added is found, at the line that holds the mark
        assert not result.breaks_removed, shown
        assert {g.location.line for g in result.breaks_added} == \
            {g.location.line for g in result.breaks_added if MARK in (g.location.code or "")}, shown
        assert len({g.location.line for g in result.breaks_added}) == edit.adds, shown
    elif edit.removes_only:  # fix's own diff: breaks gone, nothing new
        assert result.breaks_removed and not result.breaks_added, shown
    else:
        assert not result.breaks_added and not result.breaks_removed, shown
        # Frames too: each compiled frame of the program's own files is one of the other run's, resumed
        # ones included (a library's frames may change with a real release: transformers 5.24 wraps
        # methods in a deprecation decorator, whose wrapper is a frame of its own).
        unmatched = [f["function"] for f in result.frames if 0 in (f["compiles"]["before"], f["compiles"]["after"])
                     and f["file"] in program.version(None)]
        assert not unmatched, shown


def test_two_blank_lines_pass_check_and_compare_says_moved(capsys):
    folder = VERSIONS[-1]
    program = next(p for p in PROGRAMS if p.name == "graph_breaks")
    edit = next(e for e in program.edits if e.name == "two blank lines at the top")
    base, edited = str(folder / capture_name(program, None)), str(folder / capture_name(program, edit))
    assert main(["check", edited, "--baseline", base]) == 0
    assert "dynscope check: ok (0 problems)" in capsys.readouterr().out
    assert main(["compare", base, edited]) == 0
    out = capsys.readouterr().out
    moved = [line for line in out.splitlines() if line.startswith("~ break moved")]
    assert len(moved) == 4 and "+ graph break" not in out and "- graph break" not in out
    assert "graph_breaks.py:20 → graph_breaks.py:22" in moved[0]


def test_an_older_capture_is_still_a_baseline():
    """A baseline recorded before captures held a break's qualified name and neighbours
    (tests/data/captures: examples/graph_breaks.py) matches today's capture of the edited file on the
    line's own text: moved, nothing new."""
    old = Path(__file__).resolve().parents[1] / "data" / "captures" / "2.13.0+cpu" / "graph_breaks_eager.dynscope"
    program = next(p for p in PROGRAMS if p.name == "graph_breaks")
    edit = next(e for e in program.edits if e.name == "two blank lines at the top")
    with Capture.open(str(old)) as before, Capture.open(str(VERSIONS[-1] / capture_name(program, edit))) as after:
        assert not any(b.location.qualname or b.location.above for b in before.graph_breaks())
        result = compare(before, after)
    assert not result.breaks_added and not result.breaks_removed
    assert [(m.before.location.line, m.after.location.line) for m in result.breaks_moved] == \
        [(20, 22), (21, 23), (23, 25), (25, 27)]


def test_compare_and_check_say_when_the_runs_used_different_backends(capsys):
    folder = Path(__file__).resolve().parents[1] / "data" / "captures" / "2.13.0+cpu"
    aot, eager = str(folder / "train_loop_aot_eager.dynscope"), str(folder / "graph_breaks_eager.dynscope")
    assert main(["compare", aot, eager]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith("  the runs used different backends: aot_eager-like (AOTAutograd, no Inductor) (before) → "
                             "eager-like (no AOTAutograd) (after)")
    assert main(["check", eager, "--baseline", eager, "--format", "github"]) == 0  # one backend: no warning
    assert "::warning" not in capsys.readouterr().out
    main(["check", eager, "--baseline", aot, "--format", "github"])
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("::warning")]
    assert len(warnings) == 2 and "the entry scripts differ" in warnings[0] and "different backends" in warnings[1]


def test_a_shared_bundle_keeps_no_statement_of_the_program(tmp_path, capsys):
    """The statement and neighbours a capture now holds are source: `dynscope share` takes them out too."""
    program = next(p for p in PROGRAMS if p.name == "graph_breaks")
    bundle = tmp_path / "shared.dynscope"
    assert main(["share", str(VERSIONS[-1] / capture_name(program, None)), "-o", str(bundle)]) == 0
    capsys.readouterr()
    with Capture.open(str(bundle)) as shared:
        frames = [b.location for b in shared.graph_breaks()]
    assert frames and all(f.statement and f.statement.startswith("<source:") for f in frames)
    assert all(t.startswith("<source:") for f in frames for t in (*f.above, *f.below))
