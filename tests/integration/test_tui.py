"""The terminal UI, driven by real key presses (Textual's Pilot) on recorded captures of the examples
(tests/data/tui: real runs, recorded once, read here without compiling).

Every expectation is taken from the model or from the example's source, then looked for on
the screen's widgets: the UI must show what the capture holds, and take the user from a
break to its line, from a recompile to its guard, through every stage, and from a kernel
to its nodes and source line. Snapshots of the main screens are in test_tui_screens.py.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_dynscope
from recorded_tui import SNAPSHOT_ROOT, recorded
from textual.widgets import DataTable, OptionList, Static, TabbedContent, Tree
from tui_pilot import drive as pilot_drive
from tui_pilot import settle, text_of

from dynscope.analysis.breaks import group_breaks
from dynscope.analysis.diff import previous_recorded
from dynscope.analysis.run_view import run_view
from dynscope.analysis.search import definition_line
from dynscope.commands.tui import html_exporter
from dynscope.model import Capture
from dynscope.store.schema import SCHEMA_VERSION
from dynscope.tui.app import DynscopeApp
from dynscope.tui.breaks import BreaksPane
from dynscope.tui.code_view import CodeView
from dynscope.tui.compiles import CompilesPane
from dynscope.tui.guards import GuardsPane
from dynscope.tui.help import HelpScreen
from dynscope.tui.kernels import KernelsPane
from dynscope.tui.search import SearchScreen
from dynscope.tui.source import SourceScreen

GRAPH_BREAKS = (EXAMPLES / "graph_breaks.py").read_text().splitlines()


# Recorded captures (tests/data/tui): the UI is tested on what a run recorded, without compiling.
@pytest.fixture(scope="module")
def breaks_path() -> Path:
    return recorded("breaks")  # examples/graph_breaks.py --backend aot_eager


@pytest.fixture(scope="module")
def recompiles_path() -> Path:
    return recorded("recompiles")  # examples/recompiles.py --backend eager


@pytest.fixture(scope="module")
def conv_path() -> Path:
    return recorded("conv")  # examples/conv_net.py --backend inductor


def drive(path: Path, script, **options) -> None:
    """tui_pilot.drive, the recorded programs' directory allowed as a source root."""
    pilot_drive(path, script, **{"source_roots": (str(SNAPSHOT_ROOT),), **options})


async def press(app: DynscopeApp, pilot, *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
        await settle(app, pilot)


async def search(app: DynscopeApp, pilot, query: str) -> SearchScreen:
    """Open the search, type ``query`` and wait until every compile has been searched."""
    await press(app, pilot, "slash", *query)
    while not app.screen.done:
        await pilot.pause(0.05)
    await settle(app, pilot)
    return app.screen


def active_tab(app: DynscopeApp) -> str:
    return app.query_one("#tabs", TabbedContent).active


# -- overview -------------------------------------------------------------------------------


def test_overview_shows_the_runs_facts_counts_and_problems_worst_first(breaks_path):
    with Capture.open(str(breaks_path)) as capture:
        expected = run_view(capture).totals
        problems = run_view(capture).problems
        torch_version = capture.run.torch_version

    async def script(app, pilot):
        facts = text_of(app.query_one("#run-facts", Static))
        assert f"torch {torch_version}" in facts and "single process" in facts and "exit 0" in facts
        assert (f"{expected.frames} frames · {expected.compiles} compiles · {expected.graphs} graphs · "
                f"{expected.graph_breaks} graph breaks ({expected.distinct_graph_breaks} distinct) · "
                f"{expected.recompiles} recompiles · {expected.errors} errors") in facts
        listing = app.query_one("#problems", OptionList)
        assert listing.option_count == len(problems) == 4
        assert app.focused is listing
        # enter on the first problem opens that break
        await press(app, pilot, "enter")
        assert active_tab(app) == "breaks"
        assert app.query_one(BreaksPane).selected.headline == problems[0].group.headline

    drive(breaks_path, script)


def test_a_recompile_problem_opens_its_failing_guard(recompiles_path):
    with Capture.open(str(recompiles_path)) as capture:
        problem = next(p for p in run_view(capture).problems if p.kind == "recompile")

    async def script(app, pilot):
        index = app.problems.index(problem)
        await press(app, pilot, *["down"] * index, "enter")
        assert active_tab(app) == "guards"
        assert app.query_one(GuardsPane).shown_compile == problem.compile_ids[0]

    drive(recompiles_path, script)


# -- graph breaks ---------------------------------------------------------------------------


def test_from_a_graph_break_to_its_source_line(breaks_path):
    item_line = next(i for i, line in enumerate(GRAPH_BREAKS, 1) if ".item()" in line)
    with Capture.open(str(breaks_path)) as capture:
        groups = group_breaks(capture.graph_breaks())
    index = next(i for i, g in enumerate(groups) if g.location.line == item_line)
    group = groups[index]

    async def script(app, pilot):
        await press(app, pilot, "3", *["down"] * index)
        view = app.query_one(BreaksPane)
        assert view.selected.location.line == item_line
        details = text_of(app.query_one("#break-info", Static))
        assert group.headline in details and group.explanation in details and group.doc_link in details
        assert all(hint in details for hint in group.hints)
        assert f"examples/graph_breaks.py:{item_line}" in details
        stack = app.query_one("#break-stack", OptionList)
        assert stack.option_count == len(group.first.user_stack) >= 1
        excerpt = app.query_one("#break-source", CodeView)
        assert excerpt.marked_line == item_line
        assert excerpt.line_text(item_line) == GRAPH_BREAKS[item_line - 1]

        await press(app, pilot, "enter")  # the whole file, at the break's line
        assert isinstance(app.screen, SourceScreen)
        source = app.screen.query_one(CodeView)
        assert source.marked_line == item_line and source.text == "\n".join(GRAPH_BREAKS)
        await press(app, pilot, "escape")
        assert not isinstance(app.screen, SourceScreen) and active_tab(app) == "breaks"

    drive(breaks_path, script)


# -- compiles: navigation tree and stage stepper --------------------------------------------


def test_stepping_through_every_stage_of_a_compile_in_pipeline_order(breaks_path):
    with Capture.open(str(breaks_path)) as capture:
        stages = capture.stages("0/0")
        texts = {s.key: capture.stage_text(s) for s in stages if s.recorded}
        views = {v: capture.stage_text(stages[0], v) for v in stages[0].variants}
    keys = [s.key for s in stages]
    assert "dynamo" in texts and any(not s.recorded for s in stages)
    assert keys[0] == "bytecode" and set(views) == {"original", "modified"}

    async def script(app, pilot):
        await press(app, pilot, "2")
        stepper = app.query_one(CompilesPane).stepper
        assert stepper.code.text == views["original"].expandtabs(4).rstrip("\n")
        await press(app, pilot, "v")  # the bytecode as Dynamo rewrote it
        assert stepper.code.text == views["modified"].expandtabs(4).rstrip("\n")
        seen = [stepper.stage.key]
        for _ in range(len(stages) - 1):
            await press(app, pilot, "n")
            seen.append(stepper.stage.key)
            stage = stepper.stage
            if stage.recorded:
                assert stepper.code.text == texts[stage.key].expandtabs(4).rstrip("\n")
            else:
                assert stage.missing_reason in stepper.code.text
        assert seen == keys
        await press(app, pilot, "n")  # past the last stage: stays
        assert stepper.stage.key == keys[-1]
        await press(app, pilot, "p", "left")  # back with p and ←
        assert stepper.stage.key == keys[-3]
        while stepper.stage.key != "dynamo":
            await press(app, pilot, "left")
        await press(app, pilot, "right")
        assert stepper.stage.key == keys[keys.index("dynamo") + 1]

    drive(breaks_path, script)


def test_the_diff_toggle_shows_what_a_step_changed(breaks_path):
    with Capture.open(str(breaks_path)) as capture:
        stages = capture.stages("0/0")
        inference = next(s for s in stages if s.key == "aot_inference")
        before = previous_recorded(stages, inference)

    async def script(app, pilot):
        await press(app, pilot, "2")
        stepper = app.query_one(CompilesPane).stepper
        while stepper.stage.key != "aot_inference":
            await press(app, pilot, "n")
        plain_text = stepper.code.text
        await press(app, pilot, "d")
        diff = stepper.code.text
        assert diff.splitlines()[0] == f"{before.key} → aot_inference"
        assert "@@" in diff and "torch.ops.aten" in diff  # a unified diff from torch IR to aten
        await press(app, pilot, "n")  # the diff stays on while stepping
        assert stepper.view.request.diff
        await press(app, pilot, "p", "d")
        assert stepper.code.text == plain_text

    drive(breaks_path, script)


def test_the_tree_lists_rank_frames_compiles_and_stages_and_filters(recompiles_path):
    with Capture.open(str(recompiles_path)) as capture:
        frames = capture.frames()
        stages = [s.key for s in capture.stages("0/2")]

    async def script(app, pilot):
        await press(app, pilot, "2")
        tree = app.query_one("#compile-tree", Tree)
        assert str(tree.root.label).startswith("rank 0 (single process)")
        assert [n.data for n in tree.root.children] == frames
        assert [c.data.compile_id for n in tree.root.children for c in n.children] == \
            [cid for f in frames for cid in f.compile_ids]
        compile_node = tree.compile_node("0/2")
        compile_node.expand()
        await settle(app, pilot)
        assert [leaf.data.key for leaf in compile_node.children] == stages

        await press(app, pilot, "f", *"0/2")
        assert [c.data.compile_id for n in tree.root.children for c in n.children] == ["0/2"]
        for _ in "0/2":
            await press(app, pilot, "backspace")
        await press(app, pilot, *"forward")
        forward = [cid for f in frames if f.function == "forward" for cid in f.compile_ids]
        assert [c.data.compile_id for n in tree.root.children for c in n.children] == forward == ["1/0", "1/1"]

    drive(recompiles_path, script)


# -- recompiles and guards ------------------------------------------------------------------


def test_a_recompile_shows_the_failing_guard_expected_vs_actual_the_diff_and_the_guards(recompiles_path):
    with Capture.open(str(recompiles_path)) as capture:
        recompiles = capture.recompiles()
        guard_counts = {c.compile_id: len(capture.guards(c.compile_id)) for c in capture.compiles()}
        compiles = [c.compile_id for c in capture.compiles()]

    async def script(app, pilot):
        await press(app, pilot, "4")
        table = app.query_one("#guard-compiles", DataTable)
        assert table.row_count == len(compiles)
        view = app.query_one(GuardsPane)
        for r in recompiles[:2]:
            row = compiles.index(r.compile_id)
            while table.cursor_row != row:
                await press(app, pilot, "down" if table.cursor_row < row else "up")
            assert view.shown_compile == r.compile_id
            details = text_of(app.query_one("#guard-detail", Static))
            failure = r.failures[0]
            assert failure.guard in details
            assert f"expected  {failure.expected}" in details and f"actual    {failure.actual}" in details
            assert f"What changed from {failure.failed_compile_id} to {r.compile_id}" in details
            assert f"Guards of {r.compile_id} ({guard_counts[r.compile_id]})" in details

    drive(recompiles_path, script)


# -- search, palette, help, export ----------------------------------------------------------


def test_search_finds_a_break_reason_and_opens_the_break(breaks_path):
    async def script(app, pilot):
        screen = await search(app, pilot, "item()")
        assert isinstance(screen, SearchScreen)
        hits = screen.hits
        assert [h.kind for h in hits] == ["graph_break"]
        await press(app, pilot, "enter", "enter")  # to the results, then pick the first
        assert active_tab(app) == "breaks"
        assert "item()" in app.query_one(BreaksPane).selected.headline

    drive(breaks_path, script)


def test_search_finds_nodes_by_op_and_marks_the_node_in_its_stage(breaks_path):
    async def script(app, pilot):
        hits = (await search(app, pilot, "gelu")).hits
        node_hits = [h for h in hits if h.kind == "node"]
        assert node_hits and {h.stage_key for h in node_hits} >= {"dynamo", "aot_inference"}
        target = next(h for h in hits if h.kind == "node" and h.stage_key == "aot_inference")
        await press(app, pilot, "enter", *["down"] * hits.index(target), "enter")
        stepper = app.query_one(CompilesPane).stepper
        assert (stepper.stage.compile_id, stepper.stage.key) == (target.compile_id, "aot_inference")
        marked = stepper.code.marked_line
        assert marked == definition_line(stepper.code.text, target.name)
        assert stepper.code.line_text(marked).strip().startswith(target.name)

    drive(breaks_path, script)


def test_the_command_palette_jumps_to_a_compile(recompiles_path):
    async def script(app, pilot):
        await press(app, pilot, "ctrl+p", *"Compile 1/1")
        await pilot.pause(0.3)  # the palette searches in the background
        await press(app, pilot, "enter")
        assert active_tab(app) == "compiles"
        assert app.query_one(CompilesPane).stepper.stage.compile_id == "1/1"

    drive(recompiles_path, script)


def test_help_lists_the_keys_and_closes(breaks_path):
    async def script(app, pilot):
        await press(app, pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = " ".join(text_of(s) for s in app.screen.query(Static))
        assert "next stage in pipeline order" in shown and "search" in shown
        await press(app, pilot, "escape")
        assert not isinstance(app.screen, HelpScreen)

    drive(breaks_path, script)


def test_e_exports_the_html_report_next_to_the_capture(tmp_path, recompiles_path):
    capture = tmp_path / "run.dynscope"
    shutil.copy(recompiles_path, capture)
    exporter = html_exporter(str(capture))
    if exporter is None:
        pytest.skip("the HTML reporter is not installed")

    async def script(app, pilot):
        await press(app, pilot, "e")
        assert (tmp_path / "run.html").read_text().lstrip().lower().startswith("<!doctype html")
        await press(app, pilot, "e")  # again: the report is there now, and the user is told it is replaced
        messages = [n.message for n in app._notifications]
        assert messages[-2:] == [f"Writing {tmp_path / 'run.html'} (replacing the report already there)…",
                                 f"Replaced {tmp_path / 'run.html'}"]
        assert not any("replac" in m.lower() for m in messages[:2])

    drive(capture, script, export_html=exporter)


def test_e_without_a_reporter_says_so(recompiles_path):
    async def script(app, pilot):
        await press(app, pilot, "e")
        assert [n.message for n in app._notifications] == [
            "The HTML reporter is not available in this installation."]

    drive(recompiles_path, script, export_html=None)


# -- kernels and inductor stages (one shared inductor capture) ------------------------------


@pytest.mark.parametrize("size", [(80, 24), (160, 40)], ids=["80x24", "160x40"])
def test_kernel_tree_never_cuts_a_line_number(conv_path, size):
    """Each compile's label in the kernels tree shows its whole file:line at 80 and 160 columns."""
    with Capture.open(str(conv_path)) as capture:
        wanted = {c.compile_id: f"{Path(c.file).name}:{c.line}" for c in capture.compiles()
                  if "output_code" in capture.recorded_stage_names(c.compile_id)}

    async def script(app, pilot):
        await press(app, pilot, "5")
        tree = app.query_one("#kernel-tree", Tree)
        region = tree.content_region
        assert wanted
        for node in tree.root.children:
            label = node.label.plain
            place = wanted[node.data.compile_id]
            assert place in label
            # the place is at the start, within the visible width of the tree
            assert len(label[: label.index(place) + len(place)]) + 4 <= region.width

    drive(conv_path, script, size=size)


def test_from_a_kernel_to_its_fx_nodes_and_source_line(conv_path):
    with Capture.open(str(conv_path)) as capture:
        kernels = capture.kernels("0/0")
    index = next(i for i, k in enumerate(kernels) if "gelu" in k.name and k.graph == "forward")
    kernel = kernels[index]
    assert kernel.source_lines and kernel.post_grad_nodes

    async def script(app, pilot):
        await press(app, pilot, "5")
        view = app.query_one(KernelsPane)
        await press(app, pilot, *["down"] * index)
        assert view.kernel == kernel
        assert app.query_one("#kernel-code", CodeView).text == kernel.source.expandtabs(4).rstrip("\n")
        # the first provenance row is the user's source line
        await press(app, pilot, "tab", "enter")
        assert isinstance(app.screen, SourceScreen)
        line = kernel.source_lines[0]
        source = app.screen.query_one(CodeView)
        assert source.marked_line == line.line and source.line_text(line.line).strip() == line.code.strip()
        await press(app, pilot, "escape")
        # the next rows are the post-grad nodes it computes: jump into the post-grad graph
        node = kernel.post_grad_nodes[0]
        await press(app, pilot, *["down"] * len(kernel.source_lines), "enter")
        assert active_tab(app) == "compiles"
        stepper = app.query_one(CompilesPane).stepper
        assert stepper.stage.key == "post_grad"
        assert stepper.code.line_text(stepper.code.marked_line).strip().startswith(node)

    drive(conv_path, script, size=(200, 60))


def test_inductor_stages_step_to_the_kernels_with_diffs(conv_path):
    with Capture.open(str(conv_path)) as capture:
        stages = capture.stages("0/0")
    keys = [s.key for s in stages]
    assert keys[-1].startswith("kernel:")

    async def script(app, pilot):
        await press(app, pilot, "2")
        stepper = app.query_one(CompilesPane).stepper
        await press(app, pilot, *["n"] * keys.index("post_grad"))
        assert stepper.stage.key == "post_grad"
        await press(app, pilot, "d")
        summary = stepper.code.text.splitlines()
        assert summary[0] == f"{previous_recorded(stages, stepper.stage).key} → post_grad"
        assert any(line.strip().endswith("→ kernel " + kernel) for line in summary
                   for kernel in [k.removeprefix("kernel:") for k in keys if k.startswith("kernel:")])
        await press(app, pilot, "d", *["n"] * (len(keys) - 1 - keys.index("post_grad")))
        assert stepper.stage.key == keys[-1] and stepper.stage.name == "kernel"

    drive(conv_path, script)


def test_search_finds_kernels_by_name_and_opens_them(conv_path):
    async def script(app, pilot):
        found = (await search(app, pilot, "cpp_fused")).hits
        hits = [h for h in found if h.kind == "kernel"]
        assert hits and all("cpp_fused" in h.name for h in hits)
        index = found.index(hits[-1])
        await press(app, pilot, "enter", *["down"] * index, "enter")
        assert active_tab(app) == "kernels"
        assert app.query_one(KernelsPane).kernel.key == hits[-1].stage_key

    drive(conv_path, script)


# -- bad input: one clear line, never a crashed terminal ------------------------------------


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.returncode != 0
    assert result.stderr.startswith("dynscope: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    for fragment in fragments:
        assert fragment in result.stderr


def test_a_missing_capture_is_one_line(tmp_path):
    assert_one_line_error(run_dynscope("tui", str(tmp_path / "nope.dynscope")), "no such capture")


def test_a_corrupt_capture_is_one_line(tmp_path):
    junk = tmp_path / "junk.dynscope"
    junk.write_bytes(b"not a capture at all\n" * 100)
    assert_one_line_error(run_dynscope("tui", str(junk)), "not a dynscope capture")


def test_a_truncated_capture_is_one_line(tmp_path, recompiles_path):
    cut = tmp_path / "cut.dynscope"
    data = recompiles_path.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    assert_one_line_error(run_dynscope("tui", str(cut)), "truncated")


def test_a_capture_from_a_newer_dynscope_is_one_line(tmp_path, recompiles_path):
    newer = tmp_path / "newer.dynscope"
    shutil.copy(recompiles_path, newer)
    with sqlite3.connect(newer) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    assert_one_line_error(run_dynscope("tui", str(newer)), "newer dynscope", "upgrade")


def test_without_a_terminal_it_says_so_in_one_line(recompiles_path):
    assert_one_line_error(run_dynscope("tui", str(recompiles_path)), "interactive terminal", "dynscope summary")
