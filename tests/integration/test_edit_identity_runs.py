"""The edit corpus live (issue 41): examples/graph_breaks.py and edits of it, recorded now with
backend eager, compared as `compare` and `check --baseline` see them. The whole corpus, two real
models included, runs on recorded captures in tests/unit/test_edit_identity.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import run_dynscope
from edit_corpus import MARK, PROGRAMS

PROGRAM = next(p for p in PROGRAMS if p.name == "graph_breaks")
EDITS = {e.name: e for e in PROGRAM.edits}
USED = ("two blank lines at the top", "a comment inside every function", "fix's diff applied", "print added in forward")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("edits")
    made = {}
    for name in (None, *USED):
        folder = root / (name or "base").replace(" ", "_").replace("'", "")
        PROGRAM.write(EDITS[name] if name else None, folder)
        result = run_dynscope("explain", "-q", "-o", "run.dynscope", PROGRAM.entry, *PROGRAM.args, cwd=folder)
        assert result.returncode == 0, result.stderr[-3000:]
        made[name or "base"] = folder / "run.dynscope"
    return made


def compared(runs, edit: str) -> dict:
    result = run_dynscope("compare", str(runs["base"]), str(runs[edit]), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_capture_holds_what_identifies_a_break(runs):
    script = ("import sys\nfrom dynscope.model import Capture\n"
              "with Capture.open(sys.argv[1]) as c:\n"
              "    for b in c.graph_breaks():\n"
              "        f = b.location\n"
              "        print(f.line, f.function, f.qualname, f.above, f.below, repr(f.statement))\n")
    out = subprocess.run([sys.executable, "-c", script, str(runs["base"])], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0].startswith("20 forward Block.forward ('y = F.gelu(self.proj(x))', 'def forward(self, x):')")
    # A break in a resumed frame: torch names the code object after the previous break's line; the
    # qualified name is the function's own.
    assert "torch_dynamo_resume_in_forward_at_20 Block.forward" in out[1]
    # The statement of a compound one is its header; the neighbours are statements (the body's too).
    assert out[1].endswith("'if y.mean() > 0:  # break 2: data-dependent control flow'")
    assert "('y = self.norm(y)', 'scale = y.abs().max().item()  # break 3: .item() leaves the graph')" in out[1]


def test_two_blank_lines_move_every_break_and_frame(runs):
    doc = compared(runs, "two blank lines at the top")
    breaks = doc["graph_breaks"]
    assert not breaks["added"] and not breaks["removed"]
    assert [(m["before"]["line"], m["after"]["line"]) for m in breaks["moved"]] == [(20, 22), (21, 23), (23, 25), (25, 27)]
    # Each resumed frame is itself (not lumped with the others), named with today's line.
    frames = {f["function"]: f["compiles"] for f in doc["frames"]}
    assert frames == {name: {"before": 1, "after": 1} for name in (
        "forward", "torch_dynamo_resume_in_forward_at_22", "torch_dynamo_resume_in_forward_at_23",
        "torch_dynamo_resume_in_forward_at_25", "torch_dynamo_resume_in_forward_at_27")}
    text = run_dynscope("compare", str(runs["base"]), str(runs["two blank lines at the top"]))
    assert "~ break moved: graph_breaks.py:20 → graph_breaks.py:22" in text.stdout
    check = run_dynscope("check", str(runs["two blank lines at the top"]), "--baseline", str(runs["base"]))
    assert check.returncode == 0 and "dynscope check: ok (0 problems)" in check.stdout


def test_a_comment_inside_moves_nothing_new(runs):
    doc = compared(runs, "a comment inside every function")
    assert not doc["graph_breaks"]["added"] and not doc["graph_breaks"]["removed"]
    assert not doc["recompiles"]["added"] and not doc["recompiles"]["removed"]


def test_fixs_diff_makes_breaks_gone_and_none_new(runs):
    doc = compared(runs, "fix's diff applied")
    assert not doc["graph_breaks"]["added"]
    assert {b["gb_id"] for b in doc["graph_breaks"]["removed"]} == {"GB0059", "GB0170"}
    check = run_dynscope("check", str(runs["fix's diff applied"]), "--baseline", str(runs["base"]))
    assert check.returncode == 0, check.stdout


def test_an_added_break_is_found_at_its_line(runs):
    doc = compared(runs, "print added in forward")
    [added] = doc["graph_breaks"]["added"]
    assert MARK in added["code"] and added["line"] == 19 and not doc["graph_breaks"]["removed"]
    check = run_dynscope("check", str(runs["print added in forward"]), "--baseline", str(runs["base"]),
                         "--format", "github")
    assert check.returncode == 1
    assert "::error file=graph_breaks.py,line=19,title=new graph break [GB0059]::" in check.stdout
