"""Issue 42's small things, on recorded captures: the TUI palette lists dynscope's commands first
and its Screenshot saves where it says; the Markdown report names no absolute working directory
and shows what torch's prose puts in backticks as code."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.command import CommandList, CommandPalette
from tui_pilot import drive, settle

from dynscope.commands import main
from dynscope.safe_text import markdown_prose

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = sorted((ROOT / "tests" / "data" / "captures").glob("*/graph_breaks_eager.dynscope"))[-1]


def test_the_palette_lists_dynscopes_commands_first_and_textuals_after(tmp_path):
    shown: list[str] = []

    async def script(app, pilot):
        await pilot.press("ctrl+p")
        await settle(app, pilot)
        await pilot.pause(0.3)  # the palette gathers its commands in a worker
        assert isinstance(app.screen, CommandPalette)
        listing = app.screen.query_one(CommandList)
        shown.extend(str(listing.get_option_at_index(i).prompt).split("\n")[0] for i in range(listing.option_count))

    drive(CAPTURE, script, size=(100, 60))
    ours = [f"Go to {title}" for _, title in (("overview", "overview"), ("compiles", "compiles"), ("breaks", "graph breaks"),
                                               ("guards", "recompiles & guards"), ("kernels", "kernels"))]
    assert shown[:len(ours)] == ours, shown
    assert "Screenshot" in shown and "Quit the application" in shown or "Quit" in " ".join(shown)
    assert shown.index("Screenshot") > shown.index("Help")  # Textual's after all of dynscope's


def test_the_screenshot_is_saved_where_it_says(tmp_path):
    capture = tmp_path / "run.dynscope"
    shutil.copy(CAPTURE, capture)
    said: list[str] = []

    async def script(app, pilot):
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Screenshot")
        assert command.help.endswith(f"in {tmp_path}")  # what it says
        app.action_save_screenshot()
        await settle(app, pilot)
        said.extend(n.message for n in app._notifications)

    drive(capture, script)
    saved = list(tmp_path.glob("run-*.svg"))
    assert len(saved) == 1 and saved[0].read_text().lstrip().startswith("<svg")
    assert said == [f"Saved {saved[0]}"]


def test_a_screenshot_that_cannot_be_saved_says_where_and_why(tmp_path):
    capture = tmp_path / "gone" / "run.dynscope"
    capture.parent.mkdir()
    shutil.copy(CAPTURE, capture)
    said: list[str] = []

    async def script(app, pilot):
        shutil.rmtree(capture.parent)  # the capture's directory removed while the app shows it
        app.action_save_screenshot()
        await settle(app, pilot)
        said.extend(n.message for n in app._notifications)

    drive(capture, script)
    assert len(said) == 1 and said[0].startswith(f"Screenshot not saved: {capture.parent}/run-"), said
    assert said[0].endswith("No such file or directory")


def test_the_markdown_report_names_no_absolute_working_directory(capsys):
    assert main(["report", str(CAPTURE), "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    from dynscope.model import Capture

    with Capture.open(str(CAPTURE)) as capture:
        cwd = capture.run.cwd
    assert cwd and cwd.startswith("/") and cwd not in markdown
    assert "`examples/graph_breaks.py:20`" in markdown  # files named from it


def test_inline_code_in_torchs_prose_is_code():
    assert markdown_prose("builtin operator `print` with argument types ['str']") == \
        r"builtin operator `print` with argument types \['str'\]"
    assert markdown_prose("a `x|y` cell") == r"a \`x\|y\` cell"  # a pipe would split a table cell: inert
    assert markdown_prose("`<img src=x>` and *not emphasis*") == r"`<img src=x>` and \*not emphasis\*"  # code is literal
    assert markdown_prose("an odd ` backtick") == r"an odd \` backtick"


def test_the_readmes_first_setup_installs_what_the_examples_import():
    """The README's first command sets up a venv and runs an example; every example it names
    later (examples/source_breaks.py needs numpy) must run in that venv."""
    import ast
    import re
    import sys

    readme = (ROOT / "README.md").read_text()
    setup = next(line for line in readme.splitlines() if "pip install" in line and "explain examples/" in line)
    installed = set(re.search(r"pip install (.*?) &&", setup).group(1).split()) - {"-q", "-e", "."}
    installed = {re.split(r"[=<>\[]", name)[0] for name in installed} | {"dynscope"}
    local = {p.stem for p in (ROOT / "examples").glob("*.py")}
    needed: dict[str, str] = {}
    for example in sorted((ROOT / "examples").glob("*.py")):
        for node in ast.walk(ast.parse(example.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local:
                    needed.setdefault(top, example.name)
    missing = {top: where for top, where in needed.items() if top not in installed}
    assert not missing, f"the README's first setup command does not install {missing}"
