"""The numerics view (`dynscope numerics`): the error along each graph drawn as one bar row per node,
which is also the node table; the highlighted node's kernel code and source line beside it.

Each row: the node's order, its marks (● first suspect, ! suspect, ▲ the compiled error grew more
than 10× over the node before, ◆ nondeterministic), a bar of log10 of its compiled error against
the reference (on one scale for the whole view), the errors, the node and its op. The first suspect
is highlighted when the view opens, so its kernel and source line are what shows first.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from dynscope.analysis.names import location
from dynscope.analysis.numerics import ErrorPoint, NumericsView
from dynscope.errors import DynscopeError
from dynscope.model import Capture, Kernel
from dynscope.model.numerics import node_site
from dynscope.tui.code_view import CodeView
from dynscope.tui.messages import ShowKernel, ShowSource
from dynscope.tui.text import code_lines, line, lines_of, plain

BAR_WIDTH = 24
_VERDICT_STYLE = {"suspect": "bold red", "within": "bold green", "nondeterministic": "bold yellow"}

# The keys this view adds (listed in the help screen, dynscope.tui.help).
KEYS = (
    ("↑ ↓", "move along the graph: the node's kernel code and source line follow"),
    ("enter", "the node's source line"),
    ("k", "the node's kernel in the kernels view"),
)


class NumericsPane(Horizontal):
    BINDINGS = [Binding("k", "open_kernel", "Kernel")]

    def __init__(self, capture: Capture, numerics: NumericsView) -> None:
        super().__init__()
        self.capture = capture
        self.numerics = numerics
        self.points: list[ErrorPoint | None] = []  # per row of the list; None: a graph's title row
        self.point: ErrorPoint | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="numerics-plot"):
            yield Static(self._summary(), id="numerics-summary")
            yield OptionList(*self._rows(), id="numerics-nodes")
        with Vertical(id="numerics-detail"):
            yield Static(plain("Select a node.", "dim"), id="numerics-info")
            yield CodeView(id="numerics-code")

    @property
    def node_list(self) -> OptionList:
        return self.query_one("#numerics-nodes", OptionList)

    def on_mount(self) -> None:
        first = next((i for i, p in enumerate(self.points) if p is not None and p.first_suspect), None)
        if first is None:
            first = next((i for i, p in enumerate(self.points) if p is not None), None)
        if first is not None:
            self.node_list.highlighted = first

    def focus_main(self) -> None:
        self.node_list.focus()

    # -- the plot, as rows ----------------------------------------------------------------------

    def _summary(self) -> Text:
        n = self.numerics
        rows = [line(("numerics: ", "bold"), (n.verdict, _VERDICT_STYLE[n.verdict]), "  ", n.verdict_line),
                plain(n.criterion, "dim"),
                plain("● first suspect  ! suspect  ▲ error grew >10×  ◆ nondeterministic · bar: log10 of the "
                      "compiled error", "dim")]
        return lines_of(*rows)

    def _rows(self) -> list[Option]:
        values = [v for s in self.numerics.series for p in s.points for v in (p.compiled_log10, p.eager_log10)
                  if v is not None]
        low = math.floor(min(values)) if values else -12.0
        high = max(math.ceil(max(values)) if values else 0.0, low + 1)
        options: list[Option] = []
        for series in self.numerics.series:
            self.points.append(None)
            options.append(Option(line((series.label, "bold"), (f"  10^{low:g} … 10^{high:g}", "dim")), disabled=True))
            for point in series.points:
                self.points.append(point)
                options.append(Option(_row(point, low, high)))
        return options

    # -- the highlighted node -------------------------------------------------------------------

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        point = self.points[event.option_index] if event.option_index < len(self.points) else None
        if point is not None:
            self.show_point(point)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        point = self.points[event.option_index] if event.option_index < len(self.points) else None
        if point is None:
            return
        site = node_site(point.node)
        self.post_message(ShowSource(site.file, site.line, site.code))

    def show_point(self, point: ErrorPoint) -> None:
        self.point = point
        n = point.node
        marks = [m for m, on in (("first suspect", point.first_suspect), ("suspect", n.suspect and not point.first_suspect),
                                 ("error grew >10× over the node before", point.growth),
                                 ("nondeterministic: changed from one compiled run to the next", n.nondeterministic))
                 if on]
        site = node_site(n)
        rows = [line((n.node, "bold"), (f"  {n.op}", "cyan"), (f"  graph {n.graph} {n.direction}, node {n.index}", "dim")),
                line(("compiled error ", "dim"), (f"{n.compiled_error:.3g}", "bold red" if n.suspect else "bold"),
                     ("  eager error ", "dim"), f"{n.eager_error:.3g}")]
        if marks:
            rows.append(plain(" · ".join(marks), "yellow" if n.nondeterministic and not n.suspect else "red"))
        if site.file:
            where = line(("source ", "dim"), (location(site.file, site.line, self.capture.run.cwd), "cyan"))
            if site.code:
                where.append(f"  {site.code.strip()}")
            rows.append(where)
        rows.append(line(("kernel ", "dim"), (n.kernel, "bold")) if n.kernel else plain("no generated kernel", "dim"))
        rows.append(plain("enter: the source line · k: the kernel in the kernels view", "dim"))
        self.query_one("#numerics-info", Static).update(lines_of(*rows))
        code = self.query_one("#numerics-code", CodeView)
        code.show([plain("reading the kernel…", "dim")] if n.kernel else [plain("(no kernel code: an extern call or none)",
                                                                                  "dim")], numbers=False)
        if n.kernel:
            self.load_kernel(point)

    @work(thread=True, exclusive=True, group="numerics-kernel")
    def load_kernel(self, point: ErrorPoint) -> None:
        try:
            kernel = self.kernel_of(point)
        except DynscopeError as e:
            self.app.call_from_thread(self._show_code, point, None, f"cannot read kernels: {e}")
            return
        self.app.call_from_thread(self._show_code, point, kernel, None)

    def kernel_of(self, point: ErrorPoint) -> Kernel | None:
        """The recorded kernel the node's kernel name names, in its graph (forward or backward)."""
        n = point.node
        backward = n.direction == "backward"
        kernels = [k for k in self.capture.kernels(n.graph) if k.name == n.kernel]
        return next((k for k in kernels if (k.graph == "backward") == backward), kernels[0] if kernels else None)

    def _show_code(self, point: ErrorPoint, kernel: Kernel | None, error: str | None) -> None:
        if point is not self.point:  # moved on meanwhile
            return
        code = self.query_one("#numerics-code", CodeView)
        if kernel is None:
            code.show([plain(error or f"kernel {point.node.kernel} is not in this capture's output code", "yellow")],
                      numbers=False)
        else:
            code.show(code_lines(kernel.source, kernel.language))

    def action_open_kernel(self) -> None:
        point = self.point
        if point is None or not point.node.kernel:
            self.notify("This node has no generated kernel.", markup=False)
            return
        kernel = self.kernel_of(point)
        if kernel is None:
            self.notify("Its kernel is not in this capture's output code.", severity="warning", markup=False)
            return
        self.post_message(ShowKernel(kernel.compile_id, kernel.key))


def _row(point: ErrorPoint, low: float, high: float) -> Text:
    n = point.node
    mark = ("●" if point.first_suspect else "!" if n.suspect else " ") + ("▲" if point.growth else " ") + \
        ("◆" if n.nondeterministic else " ")
    style = "bold red" if n.suspect else "yellow" if n.nondeterministic else "blue"
    value = point.compiled_log10
    filled = BAR_WIDTH if value is None else round((value - low) / (high - low) * BAR_WIDTH)
    bar = "█" * max(filled, 1) + "·" * (BAR_WIDTH - max(filled, 1))
    return line((f"{n.index:>4} ", "dim"), (mark, "bold red" if n.suspect else "yellow"), " ", (bar, style),
                (f" {n.compiled_error:8.2g}", style), (f" {n.eager_error:8.2g}", "dim"), "  ", (n.node, "bold"),
                (f"  {n.op}", "dim"))

