"""`dynscope mcp` spoken to by the mcp SDK's own stdio client, as an agent would.

Initialize, list the tools, read a recorded capture's problems (tests/data), be refused a path
outside the served directory and a program-running tool without --allow-run, then judge a patch
with a real run (backend eager): the patch that removes an explicit graph break fixes the run.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

from conftest import import_or_skip

import_or_skip("mcp")
import anyio  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "tests" / "data" / "captures" / "2.13.0+cpu"

EVERY_TOOL = {"list_captures", "summary", "problems", "stages", "show_stage", "diff_compiles", "compare",
              "explain", "fix", "judge_patch", "minify"}

PROGRAM = textwrap.dedent("""\
    import torch


    def step(x):
        y = x * 2
        torch._dynamo.graph_break()
        return y + 1


    compiled = torch.compile(step, backend="eager")
    for _ in range(2):
        compiled(torch.ones(4))
""")

PATCH = "".join(difflib.unified_diff(PROGRAM.splitlines(keepends=True),
                                     PROGRAM.replace("    torch._dynamo.graph_break()\n", "").splitlines(keepends=True),
                                     "a/program.py", "b/program.py"))


def _text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def _error(result: Any) -> bool:
    return bool(getattr(result, "isError", None) or getattr(result, "is_error", None))


async def _session_calls(root: Path, calls: list[tuple[str, dict[str, Any]]], *, allow_run: bool = False,
                         ) -> tuple[set[str], str, list[Any]]:
    """Start `dynscope mcp --root ROOT`, initialize, list the tools and make the calls in order."""
    argv = ["-m", "dynscope", "mcp", "--root", str(root), *(["--allow-run"] if allow_run else [])]
    server = StdioServerParameters(command=sys.executable, args=argv, env=dict(os.environ), cwd=str(root))
    with open(root.parent / "server.stderr", "w") as errlog:
        async with stdio_client(server, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                initialized = await session.initialize()
                name = initialized.serverInfo.name if hasattr(initialized, "serverInfo") else initialized.server_info.name
                tools = {tool.name for tool in (await session.list_tools()).tools}
                results = [await session.call_tool(tool, arguments) for tool, arguments in calls]
    return tools, name, results


def _call(root: Path, calls: list[tuple[str, dict[str, Any]]], **options: bool) -> tuple[set[str], str, list[Any]]:
    return anyio.run(lambda: _session_calls(root, calls, **options))


def test_an_agent_reads_problems_and_is_refused_what_it_may_not_do(tmp_path):
    root = tmp_path / "served"
    (root / "runs").mkdir(parents=True)
    shutil.copy(RECORDED / "graph_breaks_eager.dynscope", root / "runs" / "breaks.dynscope")
    shutil.copy(RECORDED / "recompiles_eager.dynscope", root / "recompiles.dynscope")
    secret = tmp_path / "elsewhere.dynscope"  # a capture outside the served directory
    shutil.copy(RECORDED / "recompiles_eager.dynscope", secret)
    os.symlink(secret, root / "link.dynscope")  # and a link inside it that leads there
    (root / "program.py").write_text(PROGRAM)
    (root / "change.patch").write_text(PATCH)

    tools, name, (listed, problems, summary, outside, linked, escaped, diff, run, judged, minify) = _call(root, [
        ("list_captures", {}),
        ("problems", {"capture": "runs/breaks.dynscope"}),
        ("summary", {"capture": "recompiles.dynscope"}),
        ("problems", {"capture": str(secret)}),
        ("problems", {"capture": "link.dynscope"}),
        ("summary", {"capture": "../elsewhere.dynscope"}),
        ("diff_compiles", {"capture": "recompiles.dynscope", "compile_a": "0/0", "compile_b": "0/1"}),
        ("explain", {"script": "program.py"}),
        ("judge_patch", {"script": "program.py", "patch": PATCH}),
        ("minify", {"capture": "runs/breaks.dynscope", "compile_id": "0/0"}),
    ])
    assert name == "dynscope"
    assert tools == EVERY_TOOL

    # Captures are found by their header, relative to the served directory; the link out is not listed.
    assert json.loads(_text(listed))["captures"] == ["recompiles.dynscope", "runs/breaks.dynscope"]

    # The problems document: ranked, each with where it is, what it costs and what to try.
    document = json.loads(_text(problems))
    assert document["schema"] == "dynscope.problems/1"
    first = document["problems"][0]
    assert (first["kind"], first["line"], first["function"]) == ("graph_break", 20, "forward")
    assert first["file"].endswith("examples/graph_breaks.py") and "print" in first["explanation"]
    assert first["hint"] and first["compile_time_s"] > 0 and first["cost_s"] is None  # not profiled
    assert [p["kind"] for p in document["problems"]].count("graph_break") == 4

    # The summary is `dynscope summary --json`'s document, not text.
    assert json.loads(_text(summary))["schema"] == "dynscope.summary/1"
    assert json.loads(_text(summary))["totals"]["recompiles"] >= 1
    diffed = json.loads(_text(diff))
    assert diffed["schema"] == "dynscope.compile-diff/1" and diffed["guard_changes"]

    # Nothing outside the served directory, by absolute path, by a link, or by "..".
    for refused in (outside, linked, escaped):
        assert _error(refused)
        assert "outside the directory this server serves" in _text(refused)

    # Program-running tools are refused without --allow-run, saying how to allow them.
    for refused in (run, judged, minify):
        assert _error(refused)
        assert "started without --allow-run" in _text(refused) and "dynscope mcp --allow-run" in _text(refused)
    assert not (root / ".dynscope-mcp").exists()  # nothing ran


def test_an_agent_has_its_patch_judged_by_a_real_run(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    (root / "program.py").write_text(PROGRAM)
    before = (root / "program.py").read_bytes()

    _, _, (judged, outside, explained, listed) = _call(root, [
        ("judge_patch", {"script": "program.py", "patch": PATCH, "budget_s": 300}),
        ("fix", {"script": str(tmp_path / "program.py")}),
        ("explain", {"script": "program.py"}),
        ("list_captures", {}),
    ], allow_run=True)

    assert not _error(judged), _text(judged)
    document = json.loads(_text(judged))
    assert document["schema"] == "dynscope.fix/2"
    assert document["baseline"]["graph_breaks"] >= 1
    [trial] = document["trials"]
    assert trial["applies_as"] == "source"
    assert trial["verdict"] == "fixed", trial["why"]
    assert trial["after"]["graph_breaks"] == 0
    assert (root / "program.py").read_bytes() == before  # judged from memory, never applied
    # The runs' captures are in the served directory, for the reading tools.
    assert Path(trial["capture"]).resolve().is_relative_to(root.resolve())

    assert _error(outside) and "outside the directory this server serves" in _text(outside)

    # explain records a new capture in the served directory, and answers with its summary document.
    run = json.loads(_text(explained))
    assert run["schema"] == "dynscope.mcp-explain/1" and run["exit_code"] == 0
    assert run["capture"].startswith(".dynscope-mcp/explain-")
    assert run["summary"]["totals"]["graph_breaks"] == document["baseline"]["graph_breaks"] >= 1
    assert run["capture"] in json.loads(_text(listed))["captures"]
