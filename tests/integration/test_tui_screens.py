"""What the terminal UI's main screens look like: snapshots at 80x24 and 200x60, and capture
strings that look like markup shown as the literal text they are.

The captures here are made from one fixed directory (SNAPSHOT_ROOT, a copy of the programs),
so the screens show the same paths wherever the checkout is: python gives a script its
absolute path, and torch's texts (FX graph comments, guards) carry it. The app's ``hide_volatile`` option leaves
out what changes between runs and machines (timings, the torch version, the capture's
directory, object ids in guards). Kernel code depends on the CPU's vector ISA, so kernels
are checked by the Pilot tests in test_tui.py, not by snapshot.

    pytest tests/integration/test_tui_screens.py --snapshot-update    # after an intended change of a screen
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
from pathlib import Path

import pytest
from conftest import REPO, run_dynscope
from rich.console import Console
from textual.widgets import Static

from dynscope.model import Capture
from dynscope.tui.app import DynscopeApp
from dynscope.tui.code_view import CodeView
from dynscope.tui.search import SearchScreen

NARROW, WIDE = (80, 24), (200, 60)
RUNS = {
    "breaks": ("examples/graph_breaks.py", "--backend", "aot_eager"),
    "recompiles": ("examples/recompiles.py", "--backend", "eager"),
    "markup": ("tests/programs/tui_markup.py",),
}


SNAPSHOT_ROOT = Path("/tmp/dynscope-snapshots")


def snapshot_root() -> Path:
    """The programs of RUNS, copied to SNAPSHOT_ROOT (file by file, atomically: xdist workers share it)."""
    for run in RUNS.values():
        source, target = REPO / run[0], SNAPSHOT_ROOT / run[0]
        if not target.exists() or target.read_bytes() != source.read_bytes():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(f".{os.getpid()}.partial")
            shutil.copyfile(source, partial)
            os.replace(partial, target)
    return SNAPSHOT_ROOT


class FixedCaptures:
    """Captures made once per session, run from SNAPSHOT_ROOT (the same paths on every machine)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.made: dict[str, Path] = {}

    def __call__(self, name: str) -> Path:
        if name not in self.made:
            path = self.directory / f"{name}.dynscope"
            result = run_dynscope("explain", "--cold", "-q", "-o", str(path), *RUNS[name], cwd=snapshot_root())
            assert result.returncode == 0, result.stderr[-4000:]
            self.made[name] = path
        return self.made[name]


@pytest.fixture(scope="module")
def fixed_capture(tmp_path_factory) -> FixedCaptures:
    return FixedCaptures(tmp_path_factory.mktemp("fixed-captures"))


def app_for(path: Path) -> DynscopeApp:
    # The programs ran in SNAPSHOT_ROOT, outside the directory the tests run in: name it as a source root.
    return DynscopeApp(Capture.open(str(path)), hide_volatile=True, source_roots=(str(SNAPSHOT_ROOT),))


def keys(*presses: str):
    """A run_before for snap_compare: press keys, each time waiting for the work it starts."""

    async def run(pilot) -> None:
        await settle(pilot)
        for key in presses:
            await pilot.press(key)
            await settle(pilot)

    return run


async def settle(pilot) -> None:
    """Until a search has finished (it starts after a pause in typing) and no worker runs."""
    while True:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        searching = isinstance(pilot.app.screen, SearchScreen) and not pilot.app.screen.done
        if searching:
            await pilot.pause(0.05)
        elif not any(w.is_running for w in pilot.app.workers):
            return


# -- snapshots of the main screens ----------------------------------------------------------


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "200x60"])
def test_overview(snap_compare, fixed_capture, size):
    """On the recompiles example: problems that tie on kind and count are ordered by compile
    time, which varies between runs (the graph-break example's four breaks all tie)."""
    assert snap_compare(app_for(fixed_capture("recompiles")), run_before=keys(), terminal_size=size)


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "200x60"])
def test_graph_breaks(snap_compare, fixed_capture, size):
    assert snap_compare(app_for(fixed_capture("breaks")), run_before=keys("3"), terminal_size=size)


@pytest.mark.parametrize("size", [NARROW, (160, 40)], ids=["80x24", "160x40"])
def test_compiles_tree(snap_compare, fixed_capture, size):
    # Every frame's file:line whole: a tree cut at its width must not leave a wrong line number.
    assert snap_compare(app_for(fixed_capture("breaks")), run_before=keys("2"), terminal_size=size)


def test_source_at_a_break(snap_compare, fixed_capture):
    assert snap_compare(app_for(fixed_capture("breaks")), run_before=keys("3", "enter"), terminal_size=NARROW)


def test_stage_stepper(snap_compare, fixed_capture):
    """0/0's Dynamo graph (the bytecode stage before it differs between Python versions)."""
    assert snap_compare(app_for(fixed_capture("breaks")), run_before=keys("2", "n"), terminal_size=NARROW)


def test_stage_diff(snap_compare, fixed_capture):
    """The step from the Dynamo graph to AOTAutograd's inference graph, as a diff."""
    assert snap_compare(app_for(fixed_capture("breaks")), run_before=keys("2", "n", "n", "n", "d"), terminal_size=WIDE)


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "200x60"])
def test_recompiles_and_guards(snap_compare, fixed_capture, size):
    assert snap_compare(app_for(fixed_capture("recompiles")), run_before=keys("4"), terminal_size=size)


def test_search(snap_compare, fixed_capture):
    assert snap_compare(app_for(fixed_capture("breaks")), run_before=keys("3", "slash", *"gelu"), terminal_size=NARROW)


def test_help(snap_compare, fixed_capture):
    assert snap_compare(app_for(fixed_capture("recompiles")), run_before=keys("question_mark"), terminal_size=NARROW)


def test_markup_like_strings_on_screen(snap_compare, fixed_capture):
    """A break message and guard values containing "[red]", "[/]" and "[bold]", shown as typed."""
    assert snap_compare(app_for(fixed_capture("markup")), run_before=keys("4"), terminal_size=WIDE)


# -- capture strings are text, never markup -------------------------------------------------


def test_markup_in_capture_strings_is_shown_literally(fixed_capture):
    """torch._dynamo.graph_break(msg="[red]x[/] [bold]not markup") and a guard on the string
    "[red]a[/]" reach every view as the literal characters, and nothing crashes; terminal
    control sequences in the message are shown as escapes, never sent to the terminal."""
    message, expected, actual = "[red]x[/] [bold]not markup [@click=app.quit]q[/]", "'[red]a[/]'", "'[/]b[bold]'"

    async def main() -> None:
        app = app_for(fixed_capture("markup"))
        async with app.run_test(size=NARROW) as pilot:
            await settle(pilot)
            problems = " ".join(rendered(o.prompt) for o in app.query_one("#problems").options)
            assert message in problems and expected in problems
            await pilot.press("3")
            await settle(pilot)
            info = rendered(app.query_one("#break-info", Static).content)
            assert message in info and "\\x1b]0;pwned\\x07\\x1b[2J" in info and "\x1b" not in info
            await pilot.press("4")
            await settle(pilot)
            details = rendered(app.query_one("#guard-detail", Static).content)
            assert f"expected  {expected}" in details and f"actual    {actual}" in details
            await pilot.press("slash", *"[red]")
            await settle(pilot)
            assert {h.kind for h in app.screen.hits} >= {"graph_break", "recompile"}
            await pilot.press("escape", "2")
            await settle(pilot)
            assert app.query_one(CodeView).text  # the stage text rendered
            await pilot.press("question_mark")

    asyncio.run(main())


def rendered(renderable) -> str:
    console = Console(width=300, record=True, file=io.StringIO())
    console.print(renderable, soft_wrap=True)
    return console.export_text()
