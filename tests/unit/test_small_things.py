"""Small things users meet (issue 25 item 6), on recorded captures (no torch)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from dynscope.commands import main

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "data" / "captures"
VERSIONS = sorted(p.name for p in CAPTURES.iterdir() if p.is_dir() and any(p.glob("*.dynscope")))


# -- stages: rows no wider than they need -------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_stages_rows_are_not_padded_to_the_longest_kernel_name(version, capsys):
    from dynscope.commands.stages import KEY_COLUMN_MAX

    assert main(["stages", str(CAPTURES / version / "conv_net_inductor.dynscope")]) == 0
    lines = capsys.readouterr().out.splitlines()
    dynamo = next(line for line in lines if line.strip().startswith("dynamo "))
    assert len(dynamo) <= 2 + KEY_COLUMN_MAX + 2 + 30  # "  dynamo<pad>  fx  3,401 bytes"
    long_names = [i for i, line in enumerate(lines) if line.startswith("  kernel:") and len(line.strip()) > KEY_COLUMN_MAX
                  and "bytes" not in line]
    for i in long_names:  # a long name whole on its line (copyable), its row under the column
        assert lines[i + 1].startswith(" " * (2 + KEY_COLUMN_MAX + 2)) and "bytes" in lines[i + 1]
    rows = [line for line in lines if "bytes" in line]
    assert rows and max(len(line.split("  views:")[0]) for line in rows) <= 2 + KEY_COLUMN_MAX + 2 + 30


def test_stage_lines_keep_short_names_in_one_column():
    from types import SimpleNamespace

    from dynscope.commands.stages import stage_lines

    stages = [SimpleNamespace(key="dynamo", recorded=True, variants=("graph",), language="fx", size=10, missing_reason=None),
              SimpleNamespace(key="kernel:" + "x" * 150, recorded=True, variants=("code",), language="triton", size=5,
                              missing_reason=None),
              SimpleNamespace(key="post_grad", recorded=False, variants=(), language="", size=0,
                              missing_reason="not run: the backend does not use Inductor")]
    lines = [text for text, _dim in stage_lines(stages)]  # type: ignore[arg-type]
    assert lines[0] == "  dynamo" + " " * 36 + "fx              10 bytes"
    assert lines[1] == "  kernel:" + "x" * 150 and lines[2].startswith(" " * 44 + "triton")
    assert lines[3] == "  post_grad" + " " * 33 + "missing: not run: the backend does not use Inductor"


# -- compare: a renamed entry script is the same program ---------------------------------------

def _renamed(tmp_path: Path, version: str, *, command_too: bool) -> Path:
    """The graph-breaks capture as if its script had been moved to v2/graph_breaks.py."""
    copy = tmp_path / f"renamed-{command_too}.dynscope"
    shutil.copy(CAPTURES / version / "graph_breaks_eager.dynscope", copy)
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE events SET metadata = replace(metadata, 'examples/graph_breaks.py', 'v2/graph_breaks.py')")
        if command_too:
            db.execute("UPDATE meta SET value = replace(value, 'examples/graph_breaks.py', 'v2/graph_breaks.py')"
                       " WHERE key = 'command'")
    return copy


@pytest.mark.parametrize("version", VERSIONS)
def test_compare_matches_a_renamed_entry_script_and_says_so(version, tmp_path, capsys):
    original = str(CAPTURES / version / "graph_breaks_eager.dynscope")
    # The control first: the files renamed, but the same script started: the breaks do not match.
    moved = str(_renamed(tmp_path, version, command_too=False))
    assert main(["compare", original, moved, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["entry_scripts"]["renamed"] is False
    if not document["graph_breaks"]["added"]:
        pytest.skip("this torch's break places are read from payloads, which the rename leaves as they are")
    assert len(document["graph_breaks"]["added"]) == 4
    renamed = str(_renamed(tmp_path, version, command_too=True))
    assert main(["compare", original, renamed, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["entry_scripts"] == {"before": "examples/graph_breaks.py", "after": "v2/graph_breaks.py",
                                         "renamed": True}
    assert document["graph_breaks"]["added"] == [] and document["graph_breaks"]["removed"] == []
    assert document["regressed"] is False
    assert main(["compare", original, renamed]) == 0
    text = capsys.readouterr().out
    assert "the entry scripts differ: examples/graph_breaks.py (before) → v2/graph_breaks.py (after)" in text
    assert main(["compare", original, renamed, "--md"]) == 0
    assert "entry scripts differ" in capsys.readouterr().out


# -- fix: one remedy serving two problems is named once in the summary ---------------------------

def test_fix_summary_names_a_remedy_serving_two_problems_once():
    import io

    from rich.console import Console

    from dynscope.analysis.fix_document import Baseline, Combined, FixDocument
    from dynscope.reporters.fix_table import render_fix
    from dynscope.reporters.markdown import render_fix_markdown

    remedy = "torch._dynamo.config.capture_scalar_outputs = True"
    doc = FixDocument(
        command=("m.py",), cwd="/w", torch_version="2.13.0", out_dir="/o", baseline=Baseline(None, 0, "b", 1.0),
        problems=(), trials=(), runs=3, jobs=1, budget_s=60.0, wall_s=3.0, files_unchanged=True, stdin="/dev/null",
        scratch_copies=True, stdout_checked=True, profiled=False, rtol=1e-5, atol=1e-8,
        combined=Combined((remedy, remedy, "other remedy"), f"{remedy}\n", True, "fixed", ""))
    out = io.StringIO()
    render_fix(doc, Console(file=out, width=300, no_color=True))
    line = next(x for x in out.getvalue().splitlines() if x.startswith("combined"))
    assert line.count(remedy) == 1 and "other remedy" in line
    markdown = render_fix_markdown(doc)
    combined = next(x for x in markdown.splitlines() if x.startswith("**Combined**"))
    assert combined.count(r"capture\_scalar\_outputs") == 1 and "other remedy" in combined  # Markdown-escaped
    assert doc.to_json()["combined"]["remedies"] == [remedy, remedy, "other remedy"]  # the JSON stays as it was


# -- a break inside logging: placed at the user's call, the stdlib frame kept as detail ----------

LOGGING = "/usr/lib/python3.11/logging/__init__.py"


def _break_in_logging(tmp_path: Path) -> Path:
    from fake_capture import PROGRAM, FakeCapture

    from dynscope import events

    fake = FakeCapture(tmp_path / "run.dynscope")
    fake.compile("0/0", "forward", line=3)
    stack = (events.BreakFrame(PROGRAM, 7, "forward", 'logger.info("step %d", step)'),
             events.BreakFrame(LOGGING, 1489, "info", "self._log(INFO, msg, args, **kwargs)"))
    events.write(fake.writer, events.GraphBreakSeen(gb_type="Attempted to call function marked as skipped",
                                                    message="skipped", reason="skipped", user_stack=stack),
                 compile_id="0/0", attempt=0)
    return fake.close()


def test_a_break_inside_logging_is_placed_at_the_users_call(tmp_path, capsys):
    from dynscope.model import Capture

    path = _break_in_logging(tmp_path)
    with Capture.open(str(path)) as capture:
        [brk] = capture.graph_breaks()
        assert (brk.location.file, brk.location.line) == ("/m/prog.py", 7)
        assert brk.inner_location is not None and (brk.inner_location.file, brk.inner_location.line) == (LOGGING, 1489)
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "/m/prog.py:7 in forward" in out
    assert "inside <stdlib>/logging/__init__.py:1489 in info" in out  # the stdlib by name, not the interpreter's path
    assert "/usr/lib/python3.11" not in out
    assert main(["summary", "--json", str(path)]) == 0
    [brk_json] = json.loads(capsys.readouterr().out)["graph_breaks"]
    assert (brk_json["file"], brk_json["line"]) == ("/m/prog.py", 7)


def test_library_files_and_stdlib_names():
    from dynscope.analysis.names import short_path
    from dynscope.model.records import library_file

    assert library_file(LOGGING) and library_file("/v/lib/python3.12/site-packages/torch/nn/functional.py")
    assert library_file("<frozen runpy>")
    assert not library_file("/v/lib/python3.12/site-packages/transformers/m.py") and not library_file("/w/train.py")
    assert not library_file(None)
    assert short_path(LOGGING) == "<stdlib>/logging/__init__.py"
    assert short_path("/home/a/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py") == "<stdlib>/json/decoder.py"
    assert short_path("/v/lib/python3.11/site-packages/torch/x.py") == "torch/x.py"  # as before
    assert short_path("/w/proj/m.py", "/w") == "proj/m.py"


def test_the_markdown_report_keeps_the_inner_frame_too(tmp_path, capsys):
    path = _break_in_logging(tmp_path)
    assert main(["report", str(path), "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "/m/prog.py:7" in out and "inside `<stdlib>/logging/__init__.py:1489`" in out
