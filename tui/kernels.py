"""The kernels view: each generated kernel's code, highlighted, with where it came from
(the FX nodes it computes and the user's source lines), one key away."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import OptionList, Static, Tree
from textual.widgets.option_list import Option
from textual.widgets.tree import TreeNode

from dynscope.analysis.names import friendly_function, location, short_location
from dynscope.errors import DynscopeError
from dynscope.model import Capture, Compile, Kernel
from dynscope.tui.code_view import CodeView
from dynscope.tui.messages import ShowSource, ShowStage
from dynscope.tui.text import code_lines, line, lines_of, plain


class KernelTree(Tree["Compile | Kernel | None"]):
    """Compiles that produced output code; their kernels are read when a compile is expanded."""

    def __init__(self, capture: Capture) -> None:
        super().__init__(plain("kernels by compile"), id="kernel-tree")
        self.capture = capture
        self.show_root = False

    def populate(self) -> int:
        # One cheap query says which compiles reached code generation; kernels are read on expand.
        compiles = [c for c in self.capture.compiles()
                    if "output_code" in self.capture.recorded_stage_names(c.compile_id)]
        for c in compiles:
            # The place before the name: a narrow tree cuts a label's end, and a cut line number lies.
            label = line((c.compile_id, "bold"), " ", (short_location(c.file, c.line), "dim"), "  ",
                         friendly_function(c.function))
            self.root.add(label, data=c, expand=False, allow_expand=True)
        self.root.expand()
        return len(compiles)

    def compile_node(self, compile_id: str) -> TreeNode | None:
        return next((n for n in self.root.children if isinstance(n.data, Compile) and n.data.compile_id == compile_id), None)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        if isinstance(event.node.data, Compile) and not event.node.children:
            self.load_kernels(event.node)

    @work(thread=True, group="kernel-tree")
    def load_kernels(self, node: TreeNode[Compile | Kernel], select: str | None = None) -> None:
        assert isinstance(node.data, Compile)  # kernels load under a compile's node
        try:
            kernels = self.capture.kernels(node.data.compile_id)
        except DynscopeError as e:
            self.app.call_from_thread(node.add_leaf, plain(f"cannot read kernels: {e}", "red"))
            return
        self.app.call_from_thread(self._fill, node, kernels, select)

    def _fill(self, node: TreeNode, kernels: list[Kernel], select: str | None) -> None:
        if not node.children:
            for k in kernels:
                suffix = " (backward)" if k.graph == "backward" else ""
                name_style = "" if k.language == "extern" else "bold"  # generated kernels stand out
                node.add_leaf(line((k.name, name_style), (f"  {k.language}{suffix}", "dim")), data=k)
        if not node.is_expanded:
            node.expand()
        target = next((n for n in node.children if isinstance(n.data, Kernel) and n.data.key == select), None)
        if target is None and select is None and node.children:
            target = node.children[0]
        if target is not None:
            # The new rows get their line numbers when the tree is next laid out.
            self.call_after_refresh(self.move_cursor, target)

    def select_kernel(self, compile_id: str, key: str | None) -> None:
        node = self.compile_node(compile_id)
        if node is None:
            return
        if node.children:
            self._fill(node, [], key)
        else:
            self.load_kernels(node, key)


class KernelsPane(Horizontal):
    def __init__(self, capture: Capture) -> None:
        super().__init__()
        self.capture = capture
        self.kernel: Kernel | None = None
        self._links: list[tuple[str, str | int | None]] = []  # per provenance row: ("node"|"origin"|"source", what)

    def compose(self) -> ComposeResult:
        yield KernelTree(self.capture)
        with Vertical(id="kernel-detail"):
            yield Static(plain("Select a kernel.", "dim"), id="kernel-info")
            yield OptionList(id="kernel-provenance")
            yield CodeView(id="kernel-code")

    @property
    def kernel_tree(self) -> KernelTree:
        return self.query_one(KernelTree)

    def on_mount(self) -> None:
        if self.kernel_tree.populate():
            first = self.kernel_tree.root.children[0].data
            assert isinstance(first, Compile)  # the root's children are compiles
            self.kernel_tree.select_kernel(first.compile_id, None)
        else:
            self.query_one("#kernel-info", Static).update(plain(
                "No kernels: no compile in this run reached Inductor's code generation "
                "(e.g. backend=\"eager\" or \"aot_eager\", or every compile failed).", "yellow"))

    def focus_main(self) -> None:
        self.kernel_tree.focus()

    def show(self, compile_id: str, key: str) -> None:
        self.kernel_tree.select_kernel(compile_id, key)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        event.stop()
        if isinstance(event.node.data, Kernel):
            self._show_kernel(event.node.data)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        kernel = self.kernel
        kind, target = self._links[event.option_index]
        if kernel is None or target is None:
            return
        suffix = ".backward" if kernel.graph == "backward" else ""
        if kind == "node":
            self.post_message(ShowStage(kernel.compile_id, f"post_grad{suffix}", node=str(target)))
        elif kind == "origin":
            self.post_message(ShowStage(kernel.compile_id, "dynamo", node=str(target)))
        else:
            frame = kernel.source_lines[int(target)]
            self.post_message(ShowSource(frame.file, frame.line, frame.code))

    def _show_kernel(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.query_one("#kernel-info", Static).update(kernel_info(kernel))
        self._links = []
        options = []
        cwd = self.capture.run.cwd
        for i, frame in enumerate(kernel.source_lines):
            self._links.append(("source", i))
            options.append(line(("source ", "dim"), (location(frame.file, frame.line, cwd), "cyan"),
                                f"  {(frame.code or '').strip()}"))
        if kernel.post_grad_nodes:
            self._links += [("node", n) for n in kernel.post_grad_nodes]
            options += [line(("post-grad node ", "dim"), (n, "bold")) for n in kernel.post_grad_nodes]
        if kernel.origin_nodes:
            self._links += [("origin", n) for n in kernel.origin_nodes]
            options += [line(("from Dynamo node ", "dim"), n) for n in kernel.origin_nodes]
        if not options:
            self._links.append(("none", None))
            options.append(plain("torch recorded no provenance for this kernel", "dim"))
        provenance = self.query_one("#kernel-provenance", OptionList)
        provenance.clear_options()
        provenance.add_options(Option(o) for o in options)
        provenance.highlighted = 0
        self.query_one("#kernel-code", CodeView).show(code_lines(kernel.source, kernel.language))


def kernel_info(k: Kernel) -> Text:
    graph = f", {k.graph} graph" if k.graph else ""
    rows = [line((k.name, "bold"), (f"  {k.language} kernel · compile {k.compile_id}{graph}", "dim"))]
    if k.launch:
        rows.append(line(("launch ", "dim"), k.launch.strip()))
    how = {"torch": "Inductor's provenance tracking", "comments": "the output code's comments"}.get(k.provenance or "")
    rows.append(plain(f"came from (by {how}) · enter jumps to it:" if how else "no provenance recorded", "dim"))
    return lines_of(*rows)
