"""dynscope compare and check --baseline on real runs of three versions of one program."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest
from conftest import run_dynscope

HEAD = "import torch\n\n\ndef helper(x):\n    return x.cos()\n\n\n"
CALLS = ('\n\ntorch.compile(f, backend="eager")(torch.ones(4), 2)\n'
         'torch.compile(f, backend="eager")(torch.ones(4), 3)\n')
VERSIONS = {
    # print breaks at line 10, the data-dependent branch at line 12
    "before": HEAD + ("def f(x, n):\n    x = x.sin()\n    print(\"a\")\n    x = x + 1\n"
                      "    if x.sum() > 0:\n        x = x * 2\n    return helper(x) * n\n") + CALLS,
    # three lines above shift the print to line 13; the branch is gone; a new break at line 16
    "after": HEAD + "# a comment\n# that shifts\n# what follows\n" + (
        "def f(x, n):\n    x = x.sin()\n    print(\"a\")\n    x = x + 1\n    x = x * 2\n"
        "    torch._dynamo.graph_break()\n    return helper(x) * n\n") + CALLS,
    # the branch removed, nothing added
    "improved": HEAD + ("def f(x, n):\n    x = x.sin()\n    print(\"a\")\n    x = x + 1\n"
                        "    x = x * 2\n    return helper(x) * n\n") + CALLS,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each version as prog.py in a directory of its own, explained from there (two checkouts)."""
    root = tmp_path_factory.mktemp("versions")
    made = {}
    for name, source in VERSIONS.items():
        (root / name).mkdir()
        (root / name / "prog.py").write_text(source)
        result = run_dynscope("explain", "-q", "-o", str(root / f"{name}.dynscope"), "prog.py", cwd=root / name)
        assert result.returncode == 0, result.stderr[-3000:]
        made[name] = root / f"{name}.dynscope"
    return made


def test_compare_matches_breaks_across_an_edit(runs):
    result = run_dynscope("compare", str(runs["before"]), str(runs["after"]), "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "dynscope.compare/1" and doc["regressed"] is True
    breaks = doc["graph_breaks"]
    # Files as torch has them: the script's absolute path, as python gives it (each run its own checkout).
    assert [(os.path.basename(b["file"]), b["line"], b["gb_id"]) for b in breaks["added"]] == [("prog.py", 16, "GB0025")]
    assert [(os.path.basename(b["file"]), b["line"], b["gb_id"]) for b in breaks["removed"]] == [("prog.py", 12, "GB0170")]
    assert [(m["before"]["line"], m["after"]["line"], m["after"]["gb_id"]) for m in breaks["moved"]] == [(10, 13, "GB0059")]
    # The recompile on n happens in the resume function either way: the same recompile, not new.
    assert doc["recompiles"] == {"added": [], "removed": []}
    assert doc["totals"]["compiles"]["before"] == doc["totals"]["compiles"]["after"] == 4

    text = run_dynscope("compare", str(runs["before"]), str(runs["after"]))
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert "+ graph break: prog.py:16 [GB0025] Call to `torch._dynamo.graph_break()` (new)" in lines
    assert "- graph break: prog.py:12 [GB0170] Data-dependent branching (gone)" in lines
    assert any(line.startswith("~ break moved: prog.py:10 → prog.py:13 [GB0059]") for line in lines)
    assert any(line.startswith("~ compile time ") for line in lines)


def test_check_against_a_baseline_fails_only_on_what_is_new(runs, tmp_path):
    improved = run_dynscope("check", str(runs["improved"]), "--baseline", str(runs["before"]))
    assert improved.returncode == 0, improved.stdout + improved.stderr
    assert improved.stdout.splitlines()[-1] == "dynscope check: ok (0 problems)"

    regressed = run_dynscope("check", str(runs["after"]), "--baseline", str(runs["before"]),
                             "--junit", str(tmp_path / "junit.xml"))
    assert regressed.returncode == 1
    assert regressed.stdout.splitlines()[0] == (
        "prog.py:16: new graph break [GB0025] Call to `torch._dynamo.graph_break()`")
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1"
    failed = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["no new graph breaks"]
    assert "prog.py:16: new graph break [GB0025]" in failed[0].find("failure").get("message")

    github = run_dynscope("check", str(runs["after"]), "--baseline", str(runs["before"]), "--format", "github")
    assert github.returncode == 1
    assert github.stdout.splitlines() == [
        "::error file=prog.py,line=16,title=new graph break [GB0025]::Call to `torch._dynamo.graph_break()`"]

    allow = tmp_path / "allow.toml"
    allow.write_text('[[allow]]\nwhere = "prog.py:16"\nreason = "debugging the resume function"\n')
    allowed = run_dynscope("check", str(runs["after"]), "--baseline", str(runs["before"]), "--allow", str(allow))
    assert allowed.returncode == 0, allowed.stdout
    assert "(allowed: debugging the resume function)" in allowed.stdout


def test_check_bad_input_is_one_line_and_exit_2(runs, tmp_path):
    result = run_dynscope("check", str(runs["after"]), "--baseline", str(runs["before"]), str(runs["improved"]))
    assert result.returncode == 2 and "one --baseline capture per capture" in result.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[[allow]]\nwhere = \n")
    result = run_dynscope("check", str(runs["after"]), "--baseline", str(runs["before"]), "--allow", str(bad))
    assert result.returncode == 2 and result.stderr.startswith(f"dynscope: {bad} is not valid TOML")
    assert result.stderr.count("\n") == 1


def test_report_and_tui_show_the_comparison(runs, tmp_path):
    import asyncio

    from textual.widgets import Static
    from tui_pilot import settle

    from dynscope.commands.tui import _comparison
    from dynscope.model import Capture
    from dynscope.tui.app import DynscopeApp

    html = tmp_path / "r.html"
    result = run_dynscope("report", str(runs["after"]), "--against", str(runs["before"]), "-o", str(html))
    assert result.returncode == 0, result.stderr
    page = html.read_text()
    assert 'id="comparison"' in page and "+ graph break: prog.py:16 [GB0025]" in page
    doc = json.loads(run_dynscope("report", str(runs["after"]), "--against", str(runs["before"]),
                                  "--format", "json").stdout)
    assert doc["comparison"]["graph_breaks"]["added"][0]["line"] == 16

    async def main() -> str:
        with Capture.open(str(runs["after"])) as capture:
            app = DynscopeApp(capture, comparison=_comparison(capture, str(runs["before"])))
            async with app.run_test(size=(160, 50)) as pilot:
                await settle(app, pilot)
                return str(app.query_one("#comparison", Static).content)

    shown = asyncio.run(main())
    assert "- graph break: prog.py:12 [GB0170] Data-dependent branching (gone)" in shown


def test_several_ranks_are_compared_rank_by_rank(runs):
    before, after, improved = (str(runs[k]) for k in ("before", "after", "improved"))
    result = run_dynscope("compare", before, before, after, improved, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "dynscope.compare-set/1"
    assert [r["regressed"] for r in doc["ranks"]] == [True, False]
    odd = run_dynscope("compare", before, after, improved)
    assert odd.returncode == 2 and "as many of each (3 given)" in odd.stderr
