"""The `?` screen: what each view shows and the keys that drive it."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from dynscope.tui.text import plain

KEYS = (
    ("Anywhere", (
        ("1 … 5", "overview, compiles, graph breaks, recompiles & guards, kernels"),
        ("/", "search break and recompile reasons, FX node names and ops, kernel names"),
        ("ctrl+p", "command palette: jump to any compile, break or view"),
        ("e", "export the HTML report next to the capture"),
        ("?", "this help"),
        ("q", "quit"),
    )),
    ("Lists and trees", (
        ("↑ ↓", "move; the panel on the right follows"),
        ("enter", "open: a problem's view, a break's source line, a kernel's node or source line"),
        ("tab", "next panel"),
    )),
    ("Compiles (stage stepper)", (
        ("n / →", "next stage in pipeline order (bytecode → dynamo → … → kernels)"),
        ("p / ←", "previous stage"),
        ("d", "toggle the diff from the stage this one was computed from"),
        ("v", "other views of the stage: before/after passes, original/modified bytecode"),
        ("f", "filter the tree by function, file, compile id or status"),
    )),
    ("Source and code panels", (
        ("escape", "back from a source file"),
        ("shift+← →", "scroll sideways"),
    )),
)


# A run checked by `dynscope numerics` has a sixth view; its keys live with it (dynscope.tui.numerics).
NUMERICS = (("6", "numerics: the error along each graph, node by node; the first suspect's kernel and source line"),)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "app.pop_screen", "Close")]

    def __init__(self, *, numerics: bool = False) -> None:
        super().__init__()
        self.numerics = numerics

    def sections(self) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
        if not self.numerics:
            return KEYS
        from dynscope.tui.numerics import KEYS as NUMERICS_KEYS

        (title, anywhere), *rest = KEYS
        return ((title, (*anywhere[:1], *NUMERICS, *anywhere[1:])), *rest, ("Numerics", NUMERICS_KEYS))

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(plain("dynscope — what torch.compile did to your program, and why", "bold cyan"))
            for section, keys in self.sections():
                # A grid, so long descriptions wrap under themselves, not under the keys.
                grid = Table.grid(padding=(0, 2))
                grid.add_column(width=10, style="bold yellow")
                grid.add_column(ratio=1)
                for key, what in keys:
                    grid.add_row(plain(key), plain(what))
                yield Static(plain(section, "bold"), classes="section-title")
                yield Static(grid)
            yield Static(plain("escape closes this help", "dim"), classes="section-title")
