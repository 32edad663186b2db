"""The navigation tree: rank → frame → compile → stages, filtered by what the user types.

Frames and compiles come from the model's run-wide lists (one cheap query each); a compile's
stages are read only when its row is expanded, in a worker thread.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.actions import SkipAction
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from dynscope.analysis.names import ATTEMPTS_MEANING, friendly_function, location, plural, short_location
from dynscope.errors import DynscopeError
from dynscope.model import Capture, Compile, Frame, Stage
from dynscope.tui.text import count, line, plain

_STATUS_STYLE = {"ok": "green", "failed": "bold red", "skipped": "dim", "incomplete": "yellow"}

Entry = Frame | Compile | Stage | None
# Frames start expanded when this few compiles are listed; beyond, a frame opens on demand
# (a tree re-measures every visible row on each restyle, which adds up on large captures).
EXPAND_LIMIT = 200


class CompileTree(Tree[Entry]):
    # ←/→ step through stages (the compiles pane's keys) even when long labels make the tree
    # scroll sideways; shift+←/→ scroll it, as in the code view.
    BINDINGS = [
        Binding("shift+left", "scroll_sideways(-1)", "Left", show=False),
        Binding("shift+right", "scroll_sideways(1)", "Right", show=False),
    ]

    def action_scroll_left(self) -> None:
        raise SkipAction()

    def action_scroll_right(self) -> None:
        raise SkipAction()

    def action_scroll_sideways(self, direction: int) -> None:
        (super().action_scroll_right if direction > 0 else super().action_scroll_left)()

    def __init__(self, capture: Capture, *, id: str | None = None) -> None:
        super().__init__(plain(rank_label(capture)), id=id)
        self.capture = capture
        self.filter_text = ""
        if any(c.attempts > 1 for c in capture.compiles()):  # "2 attempts" on a row: what that means
            self.tooltip = ATTEMPTS_MEANING[:1].upper() + ATTEMPTS_MEANING[1:] + "."

    def populate(self, query: str = "") -> None:
        """(Re)build the frame and compile rows, keeping those whose text contains ``query``."""
        self.filter_text = query.strip().lower()
        self.clear()
        cwd = self.capture.run.cwd
        rows = []
        for frame in self.capture.frames():
            compiles = [self.capture.compile(cid) for cid in frame.compile_ids]
            kept = [c for c in compiles if self.filter_text in searchable(c, cwd)]
            if kept:
                rows.append((frame, len(compiles), kept))
        shown = sum(len(kept) for _, _, kept in rows)
        for frame, total_compiles, kept in rows:
            label = frame_label(frame, total_compiles, cwd)
            frame_node = self.root.add(label, data=frame, expand=shown <= EXPAND_LIMIT)
            for c in kept:
                frame_node.add(compile_label(c), data=c, expand=False, allow_expand=True)
        total = len(self.capture.compiles())
        if self.filter_text:
            suffix = f" · {shown} of {total} compiles match {query.strip()!r}"
        else:
            suffix = f" · {count(total, 'compile')}"
        self.root.set_label(plain(rank_label(self.capture) + suffix))
        self.root.expand()

    def compile_node(self, compile_id: str) -> TreeNode[Entry] | None:
        for frame_node in self.root.children:
            for node in frame_node.children:
                if isinstance(node.data, Compile) and node.data.compile_id == compile_id:
                    return node
        return None

    def move_to_compile(self, compile_id: str) -> None:
        node = self.compile_node(compile_id)
        if node is None and self.filter_text:
            self.populate("")  # the compile was filtered out: show everything again
            node = self.compile_node(compile_id)
        if node is not None:
            if node.parent is not None:
                node.parent.expand()
            # Rows added by populate() get their line numbers when the tree is next laid out.
            self.call_after_refresh(self._move_cursor_laid_out, node)

    def _move_cursor_laid_out(self, node: TreeNode[Entry]) -> None:
        self.move_cursor(node)
        self.call_after_refresh(self._top_if_it_fits)

    def _top_if_it_fits(self) -> None:
        """Under load the cursor's scroll can be made against the tree's size before layout (seen in CI: the
        tree scrolled two rows with the cursor on its third): a cursor that fits the first screen shows the top."""
        if 0 <= self.cursor_line < self.size.height and self.scroll_y > 0:
            self.scroll_to(y=0, animate=False, immediate=True)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[Entry]) -> None:
        if isinstance(event.node.data, Compile) and not event.node.children:
            self._add_stages(event.node)

    @work(thread=True, group="tree-stages")
    def _add_stages(self, node: TreeNode[Entry]) -> None:
        compile_ = node.data
        assert isinstance(compile_, Compile)
        try:
            stages = self.capture.stages(compile_.compile_id)
        except DynscopeError as e:
            self.app.call_from_thread(node.add_leaf, plain(f"cannot read stages: {e}", "red"))
            return
        self.app.call_from_thread(self._fill, node, stages)

    def _fill(self, node: TreeNode[Entry], stages: list[Stage]) -> None:
        if node.children:
            return
        for stage in stages:
            node.add_leaf(stage_label(stage), data=stage)


def rank_label(capture: Capture) -> str:
    run = capture.run
    if run.world_size and run.world_size > 1:
        return f"rank {run.rank} of {run.world_size}"
    return "rank 0 (single process)"


def searchable(c: Compile, cwd: str | None) -> str:
    """What the filter matches against: compile id, function, file:line, status."""
    words = [c.compile_id, c.function, friendly_function(c.function), location(c.file, c.line, cwd), c.status]
    if c.is_recompile:
        words.append("recompile")
    if c.fail_type:
        words.append(c.fail_type)
    return " ".join(words).lower()


def frame_label(frame: Frame, compiles: int, cwd: str | None) -> Text:
    # The place first, and short: a narrow tree cuts a label's end, and a cut line number lies.
    label = line((short_location(frame.file, frame.line), "cyan"), "  ", (friendly_function(frame.function), "bold"))
    if compiles > 1:
        label.append(f"  {plural(compiles, 'compile')}", style="magenta")
    return label


def compile_label(c: Compile) -> Text:
    label = line((c.compile_id, "bold"), " ", (c.status, _STATUS_STYLE.get(c.status, "")))
    if c.is_recompile:
        label.append(" recompile", style="magenta")
    if c.attempts > 1:
        label.append(f" · {c.attempts} attempts", style="dim")  # explained by the tree's tooltip
    if c.graph_op_count is not None:
        label.append(f" · {plural(c.graph_op_count, 'op')}", style="dim")
    return label


def stage_label(stage: Stage) -> Text:
    if stage.recorded:
        return plain(stage.key)
    return line((stage.key, "dim"), (" missing", "dim italic"))
