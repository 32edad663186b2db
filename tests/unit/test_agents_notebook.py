"""The notebook view and the MCP server's tools, without torch, IPython or the mcp SDK.

The summary a notebook shows (reporters/notebook.py) and the documents `dynscope mcp` answers
with (dynscope.agents.tools) are read from captures; a capture from a stranger must stay
harmless through them: escaped HTML, ASCII JSON, and no path outside the served directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from hostile_views import RECORDED, forge, unsafe_in

from dynscope.agents.served import OutsideServedDirectory, ServedDirectory
from dynscope.agents.server import _answer
from dynscope.agents.tools import RunNotAllowed, Tools
from dynscope.analysis.run_view import run_view
from dynscope.errors import DynscopeError
from dynscope.model import Capture
from dynscope.reporters.notebook import NotebookOptions, notebook_html

# -- the notebook view ------------------------------------------------------------------------


def test_the_notebook_summary_names_each_break_and_its_code_line():
    with Capture.open(str(RECORDED / "graph_breaks_eager.dynscope")) as capture:
        shown = notebook_html(capture)
    for line in (20, 21, 23, 25):  # the four breaks of examples/graph_breaks.py
        assert f"examples/graph_breaks.py:{line}" in shown
    assert "torch._dynamo.graph_break()" in shown and "4</strong> graph breaks" in shown
    # One fragment for a notebook's output: inline styles, no script, nothing fetched.
    assert "<script" not in shown and "<style" not in shown and "<link" not in shown and "src=" not in shown
    assert not re.search(r"\bclass=\"(?!dynscope-summary\")", shown)


def test_files_a_notebook_ran_are_named_as_the_notebook_names_them():
    with Capture.open(str(RECORDED / "graph_breaks_eager.dynscope")) as capture:
        shown = notebook_html(capture, NotebookOptions(file_labels=lambda f: "In[7]" if f.endswith("graph_breaks.py")
                                                       else None))
    assert "In[7], line 20 in forward" in shown and "graph_breaks.py:20" not in shown


def test_a_strangers_capture_is_inert_in_the_notebook_view(tmp_path):
    forged = forge("graph_breaks_eager", tmp_path)
    with Capture.open(str(forged)) as capture:
        shown = notebook_html(capture)
    assert unsafe_in(shown) == []
    assert "<script>alert(1)</script>" not in shown and "&lt;script&gt;alert(1)&lt;/script&gt;" in shown
    assert 'href="https://evil' not in shown
    assert all(href.startswith("https://meta-pytorch.github.io/") for href in re.findall(r'href="([^"]*)"', shown))


# -- the served directory -----------------------------------------------------------------------


@pytest.fixture
def served(tmp_path) -> ServedDirectory:
    root = tmp_path / "served"
    (root / "runs").mkdir(parents=True)
    shutil.copy(RECORDED / "graph_breaks_eager.dynscope", root / "runs" / "breaks.dynscope")
    shutil.copy(RECORDED / "recompiles_eager.dynscope", root / "recompiles.dynscope")
    (root / "notes.dynscope").write_text("not a capture")
    shutil.copy(RECORDED / "recompiles_eager.dynscope", tmp_path / "outside.dynscope")
    os.symlink(tmp_path / "outside.dynscope", root / "link.dynscope")
    os.symlink(tmp_path, root / "up")
    os.mkfifo(root / "pipe.dynscope")
    return ServedDirectory.at(str(root))


def test_every_path_a_client_names_stays_inside_the_served_directory(served, tmp_path):
    assert served.capture("runs/breaks.dynscope") == os.path.join(served.root, "runs", "breaks.dynscope")
    assert served.capture(os.path.join(served.root, "recompiles.dynscope")).endswith("recompiles.dynscope")
    for escape in ("../outside.dynscope", str(tmp_path / "outside.dynscope"), "link.dynscope",
                   "up/outside.dynscope", "runs/../../outside.dynscope", "/etc/passwd"):
        with pytest.raises(OutsideServedDirectory, match="outside the directory this server serves"):
            served.capture(escape)
    for bad in ("", "a\0b"):
        with pytest.raises(OutsideServedDirectory, match="NUL"):
            served.resolve(bad)
    with pytest.raises(DynscopeError, match="is not a dynscope capture"):
        served.capture("notes.dynscope")
    with pytest.raises(DynscopeError, match="is a FIFO, not a regular file; not opened"):
        served.capture("pipe.dynscope")  # a FIFO is never opened (it would block the server)


def test_captures_are_listed_by_their_header_without_following_links(served):
    assert Tools(served).list_captures()["captures"] == ["recompiles.dynscope", "runs/breaks.dynscope"]


# -- the tools' documents ------------------------------------------------------------------------


def test_problems_are_the_ranked_problems_every_view_shows(served):
    document = Tools(served).problems("runs/breaks.dynscope")
    assert document["schema"] == "dynscope.problems/1" and document["complete"] is True
    with Capture.open(os.path.join(served.root, "runs", "breaks.dynscope")) as capture:
        ranked = run_view(capture).problems
    assert [(p["kind"], p["line"], p["title"]) for p in document["problems"]] == \
        [(p.kind, p.location.line, p.title) for p in ranked]
    assert all(p["hint"] for p in document["problems"])  # what to try, from the remedy table


def test_stage_and_diff_documents(served):
    tools = Tools(served)
    stages = tools.stages("recompiles.dynscope", "0/1")["compiles"]
    assert [c["compile_id"] for c in stages] == ["0/1"] and stages[0]["pipeline"][0]["key"] == "bytecode"
    shown = tools.show_stage("recompiles.dynscope", "0/1", "dynamo")
    assert shown["schema"] == "dynscope.stage/1" and "def forward" in shown["text"] and not shown["truncated"]
    diff = tools.diff_compiles("recompiles.dynscope", "0/0", "0/1")
    assert diff["recompile_reason"] and diff["guard_changes"]
    with pytest.raises(DynscopeError, match="no stage 'nonsense'"):
        tools.show_stage("recompiles.dynscope", "0/1", "nonsense")


def test_answers_from_a_strangers_capture_are_ascii_json(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    forge("graph_breaks_eager", root, name="forged")
    tools = Tools(ServedDirectory.at(str(root)))
    for produce in (lambda: tools.problems("forged.dynscope"), lambda: tools.summary("forged.dynscope")):
        text = _answer(produce)
        assert text.isascii() and unsafe_in(text) == [] and "\\u001b]0;pwned-title" in text
        json.loads(text)


def test_running_tools_are_refused_without_allow_run(served):
    tools = Tools(served)
    for attempt in (lambda: tools.explain("prog.py"), lambda: tools.fix("prog.py"),
                    lambda: tools.judge_patch("prog.py", "--- a\n+++ b\n"),
                    lambda: tools.minify("recompiles.dynscope", "0/0")):
        with pytest.raises(RunNotAllowed, match=r"started without --allow-run.*dynscope mcp --allow-run"):
            attempt()
    assert not Path(served.root, ".dynscope-mcp").exists()


def test_runs_never_write_through_a_link_in_the_served_tree(served, tmp_path):
    """A tree from a stranger can hold .dynscope-mcp as a link to elsewhere: refused before anything runs."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, Path(served.root, ".dynscope-mcp"))
    Path(served.root, "prog.py").write_text("print(1)\n")
    with pytest.raises(DynscopeError, match="is a link"):
        Tools(served, allow_run=True).explain("prog.py")
    assert list(elsewhere.iterdir()) == []


def test_a_kernel_is_shown_by_its_key_and_two_runs_compared(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    shutil.copy(RECORDED / "conv_net_inductor.dynscope", root / "conv.dynscope")
    shutil.copy(RECORDED / "graph_breaks_eager.dynscope", root / "breaks.dynscope")
    tools = Tools(ServedDirectory.at(str(root)))
    shown = tools.show_stage("conv.dynscope", "0/0", "kernel:cpp_fused_add_copy__2")
    assert shown["stage"]["key"] == "kernel:cpp_fused_add_copy__2" and shown["stage"]["language"] == "cpp"
    assert shown["text"].startswith("#include") and "void  kernel(" in shown["text"] and shown["chars"] == len(shown["text"])
    compared = tools.compare("breaks.dynscope", "conv.dynscope")
    assert compared["schema"] == "dynscope.compare/1"
