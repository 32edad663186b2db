"""``dynscope mcp``: the tools of dynscope.agents.tools on the mcp SDK's server, over stdio.

Every answer is one JSON document as text (ASCII JSON: a capture's control characters and bidi
overrides arrive escaped, as in ``summary --json``); a refusal or a bad argument is an error
result with one line saying why. The SDK is imported here only: ``dynscope`` without the ``mcp``
extra works, and ``dynscope mcp`` says what to install.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dynscope.agents.tools import JUDGE_BUDGET_S, Tools
from dynscope.errors import DynscopeError

INSTRUCTIONS = """\
dynscope explains what torch.compile did to a program: graph breaks, recompiles, compile errors,
every stage from bytecode to kernels. Captures (.dynscope files) live in the directory this server
serves; every path is relative to it. Start with list_captures, then problems (ranked, with what
each costs and what to try) or summary. Tools that run a program (explain, fix, judge_patch,
minify) need the server started with --allow-run. Answers are the JSON documents of docs/mcp.md."""


def _sdk(mcp_2: str, mcp_1: str, name: str) -> Any:
    """A name of the SDK's high-level server API, which mcp 2 moved (FastMCP became MCPServer)."""
    import importlib

    try:
        module = importlib.import_module(mcp_2)
    except ImportError:
        module = importlib.import_module(mcp_1)
    return getattr(module, name)


def _server(name: str, instructions: str) -> Any:
    try:
        server_class = _sdk("mcp.server.mcpserver", "mcp.server.fastmcp", "MCPServer")
    except AttributeError:
        server_class = _sdk("mcp.server.fastmcp", "mcp.server.fastmcp", "FastMCP")
    return server_class(name, instructions=instructions)


def _tool_error(message: str) -> Exception:
    error: Exception = _sdk("mcp.server.mcpserver.exceptions", "mcp.server.fastmcp.exceptions", "ToolError")(message)
    return error


def _answer(produce: Callable[[], dict[str, Any]]) -> str:
    from dynscope.safe_text import json_text, one_line

    try:
        document = produce()
    except DynscopeError as e:
        raise _tool_error(one_line(str(e))) from None
    return json_text(document, indent=1)


def build_server(tools: Tools) -> Any:
    server = _server("dynscope", INSTRUCTIONS)

    def list_captures() -> str:
        """The capture files (.dynscope, told by their header) under the served directory, as paths relative to it
        (schema dynscope.captures/1)."""
        return _answer(tools.list_captures)

    def summary(capture: str) -> str:
        """A capture's whole summary: run, totals, compiles, graph breaks, recompiles, errors, runtime
        (schema dynscope.summary/1, as `dynscope summary --json`)."""
        return _answer(lambda: tools.summary(capture))

    def problems(capture: str) -> str:
        """A capture's problems, most harmful (or, when profiled, most costly) first: each with where it is, what
        it costs (compile time; measured seconds when profiled), what to try, and remedies `dynscope fix` proved
        (schema dynscope.problems/1)."""
        return _answer(lambda: tools.problems(capture))

    def stages(capture: str, compile_id: str | None = None) -> str:
        """The stages of each compile (or of compile_id, e.g. "0/1") in pipeline order, recorded or missing and why
        (schema dynscope.stages/1)."""
        return _answer(lambda: tools.stages(capture, compile_id))

    def show_stage(capture: str, compile_id: str, stage: str, view: str | None = None) -> str:
        """One stage's text: stage is a key from `stages` ("dynamo", "post_grad.backward", "output_code") or a
        kernel ("kernel:cpp_fused_add_0"); view picks another view of it ("before"/"after")
        (schema dynscope.stage/1)."""
        return _answer(lambda: tools.show_stage(capture, compile_id, stage, view))

    def diff_compiles(capture: str, compile_a: str, compile_b: str) -> str:
        """What changed between two compiles of one frame (a recompile, e.g. "0/0" and "0/1"): the Dynamo graph
        and the guards (schema dynscope.compile-diff/1)."""
        return _answer(lambda: tools.diff_compiles(capture, compile_a, compile_b))

    def compare(before: str, after: str) -> str:
        """Two captures of the same program (before and after a change): graph breaks added, removed and moved,
        recompiles, errors, compile time (schema dynscope.compare/1, as `dynscope compare --json`)."""
        return _answer(lambda: tools.compare(before, after))

    def explain(script: str, args: list[str] | None = None, profile: bool = False) -> str:
        """Run a Python script (inside the served directory) under dynscope and return its capture's path and
        summary. Runs a program: needs the server started with --allow-run."""
        return _answer(lambda: tools.explain(script, args, profile))

    def fix(script: str, args: list[str] | None = None, only: str | None = None, budget_s: float = 900.0) -> str:
        """Try the remedies for the script's graph breaks, recompiles and errors, each in a fresh run, and report the
        ones proven (problem gone, outputs equal) (schema dynscope.fix/2). only: "break", "recompile" or "error".
        Runs a program: needs --allow-run."""
        return _answer(lambda: tools.fix(script, args, only, budget_s))

    def judge_patch(script: str, patch: str, args: list[str] | None = None, budget_s: float = JUDGE_BUDGET_S) -> str:
        """Judge a unified diff (paths as `git apply` in the script's directory takes them) by running the script
        with it applied in memory (files on disk never change): the trial row's verdict says fixed, improved,
        no change, worse or failed (schema dynscope.fix/2, as `dynscope fix --patch`). budget_s: seconds for the
        whole judgement (default 300, at most 1800). Runs a program: needs --allow-run."""
        return _answer(lambda: tools.judge_patch(script, patch, args, budget_s))

    def minify(capture: str, compile_id: str, backend: str = "inductor", accuracy: bool = False) -> str:
        """Find which layer of torch.compile fails a recorded compile, and which op, and write a standalone repro.py
        (dynscope minify's result.json). Compiles and runs the recorded graph: needs --allow-run."""
        return _answer(lambda: tools.minify(capture, compile_id, backend, accuracy))

    for tool in (list_captures, summary, problems, stages, show_stage, diff_compiles, compare, explain, fix,
                 judge_patch, minify):
        server.add_tool(tool, structured_output=False)  # the answer is the JSON text itself
    return server


def serve(tools: Tools) -> None:
    build_server(tools).run("stdio")
