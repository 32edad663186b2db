"""The compiles view: the navigation tree on the left, the stage stepper on the right."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Tree

from dynscope.model import Capture, Compile, Stage
from dynscope.tui.navigator import CompileTree, Entry
from dynscope.tui.stage_stepper import StageStepper


class CompilesPane(Horizontal):
    # On the pane, not the stepper, so they work while the tree has focus too.
    BINDINGS = [
        Binding("n,right", "step(1)", "Next stage"),
        Binding("p,left", "step(-1)", "Prev stage"),
        Binding("d", "toggle_diff", "Diff"),
        Binding("v", "next_variant", "View", show=False),
        Binding("f", "filter", "Filter"),
    ]

    def __init__(self, capture: Capture) -> None:
        super().__init__()
        self.capture = capture

    def compose(self) -> ComposeResult:
        with Vertical(id="navigator"):
            yield Input(placeholder="filter: function, file, 0/1, failed, recompile…", id="compile-filter")
            yield CompileTree(self.capture, id="compile-tree")
        yield StageStepper(self.capture, id="stepper")

    @property
    def compile_tree(self) -> CompileTree:
        return self.query_one(CompileTree)

    @property
    def stepper(self) -> StageStepper:
        return self.query_one(StageStepper)

    def on_mount(self) -> None:
        self.compile_tree.populate()
        first = self.capture.compiles()[:1]
        if first:
            self.show(first[0].compile_id)

    def focus_main(self) -> None:
        self.compile_tree.focus()

    def show(self, compile_id: str, stage_key: str | None = None, node: str | None = None) -> None:
        self.compile_tree.move_to_compile(compile_id)
        self.stepper.show(compile_id, stage_key, node=node)

    # -- keys and events --------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        self.stepper.step(delta)

    def action_toggle_diff(self) -> None:
        self.stepper.toggle_diff()

    def action_next_variant(self) -> None:
        self.stepper.next_variant()

    def action_filter(self) -> None:
        self.query_one("#compile-filter", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.compile_tree.populate(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.compile_tree.focus()

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Entry]) -> None:
        event.stop()
        data = event.node.data
        if isinstance(data, Compile) and data.compile_id != self.stepper.compile_id:
            self.stepper.show(data.compile_id)
        elif isinstance(data, Stage):
            current = self.stepper.stage
            if current is None or (current.compile_id, current.key) != (data.compile_id, data.key):
                self.stepper.show(data.compile_id, data.key)
