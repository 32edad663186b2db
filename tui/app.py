"""The dynscope terminal UI: a Textual app over one capture.

Five views in tabs (overview, compiles with the stage stepper, graph breaks, recompiles &
guards, kernels), a sixth for a run checked by `dynscope numerics` (the error along each graph),
a search screen, a source screen and help. The app only formats what the
model and its analyses return; it never queries the capture file or parses torch's text
itself. Opening is cheap (the overview's numbers come from a few indexed queries); every
other view is built the first time it is shown, and per-compile details load in workers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, TabbedContent, TabPane

from dynscope.analysis.run_view import run_view
from dynscope.analysis.search import Hit
from dynscope.analysis.source import SourceAccess
from dynscope.errors import DynscopeError
from dynscope.model import Capture
from dynscope.safe_text import one_line
from dynscope.tui.breaks import BreaksPane
from dynscope.tui.compiles import CompilesPane
from dynscope.tui.guards import GuardsPane
from dynscope.tui.help import HelpScreen
from dynscope.tui.kernels import KernelsPane
from dynscope.tui.messages import ShowBreak, ShowGuards, ShowKernel, ShowSource, ShowStage
from dynscope.tui.numerics import NumericsPane
from dynscope.tui.overview import OverviewPane
from dynscope.tui.palette import DynscopeCommands
from dynscope.tui.search import SearchScreen
from dynscope.tui.source import SourceScreen

ExportHtml = Callable[[str], None]
View = OverviewPane | CompilesPane | BreaksPane | GuardsPane | KernelsPane | NumericsPane


class DynscopeApp(App[None]):
    CSS_PATH = "dynscope.tcss"
    TITLE = "dynscope"
    # dynscope's commands first, then Textual's own (keys, theme, quit...): one provider yields both in
    # that order (providers run side by side, so two of them would list in whichever order they finish).
    COMMANDS = {DynscopeCommands}
    # Narrow terminals stack lists above details instead of beside them (see dynscope.tcss).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    TABS = (("overview", "overview"), ("compiles", "compiles"), ("breaks", "graph breaks"),
            ("guards", "recompiles & guards"), ("kernels", "kernels"))
    BINDINGS = [
        *(Binding(str(i), f"switch_to('{tab}')", title, show=False) for i, (tab, title) in enumerate(TABS, 1)),
        # Only a run checked by `dynscope numerics` has this view (its tab and its line in the help).
        Binding("6", "switch_to('numerics')", "numerics", show=False),
        Binding("escape", "focus_view", "Back to the view", show=False),
        Binding("slash", "search", "Search"),
        Binding("question_mark", "help", "Help"),
        Binding("e", "export", "Export HTML"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, capture: Capture, *, export_html: ExportHtml | None = None, hide_volatile: bool = False,
                 divergence: tuple = (), comparison: tuple[str, ...] = (), any_source: bool = False,
                 source_roots: tuple[str, ...] = ()) -> None:
        """``export_html(path)`` writes the HTML report (the `e` key); None: no reporter installed.
        ``hide_volatile`` leaves out or masks what changes from run to run or machine to machine
        (timings, the capture's directory, the command line, the torch version, object ids in
        guards), for snapshot tests. ``divergence``: where this run's ranks part
        (dynscope.analysis.ranks.divergence over all ranks' captures), shown on the overview.
        ``comparison``: the other run's name, then the lines of dynscope.analysis.changes against it.
        ``source_roots``: directories besides the current one whose source files may be shown;
        ``any_source`` shows every source file the capture names (dynscope.analysis.source).

        Reads the overview's records here, so a damaged capture fails before the terminal is taken over."""
        super().__init__()
        self.capture = capture
        self.export_html = export_html
        self.hide_volatile = hide_volatile
        self.divergence = divergence
        self.comparison = comparison
        self.sources = SourceAccess.for_run(capture.run, source_roots=source_roots, any_source=any_source)
        self.run_view = run_view(capture)
        self.totals = self.run_view.totals
        self.problems = self.run_view.problems
        self.sub_title = one_line(Path(capture.path).name)  # a file name can hold control characters too

    def compose(self) -> ComposeResult:
        # Only the overview is built now; each other view is built the first time it is shown.
        # Short tab labels, so the five fit in 80 columns.
        with TabbedContent(initial="overview", id="tabs"):
            with TabPane("1 overview", id="overview"):
                yield OverviewPane(self.capture, self.totals, self.problems, hide_volatile=self.hide_volatile,
                                   divergence=self.divergence, comparison=self.comparison)
            yield TabPane("2 compiles", id="compiles")
            yield TabPane(f"3 breaks ({self.totals.distinct_graph_breaks})", id="breaks")
            yield TabPane(f"4 recompiles ({self.totals.recompiles})", id="guards")
            yield TabPane("5 kernels", id="kernels")
            if self.run_view.numerics is not None:
                yield TabPane(f"6 numerics ({self.run_view.numerics.verdict})", id="numerics")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(OverviewPane).focus_main()

    # -- switching views --------------------------------------------------------------------

    async def action_switch_to(self, tab: str) -> None:
        if self.query(f"TabPane#{tab}"):  # the numerics tab exists only for a checked run
            await self.switch_to(tab)

    async def switch_to(self, tab: str) -> View:
        """Show a view (building it the first time) and focus it."""
        tabs = self.query_one("#tabs", TabbedContent)
        if tabs.active != tab:
            # Drop focus first: a focused widget in the pane being hidden would hand focus to
            # a sibling in that pane, and TabbedContent would switch back to it.
            self.screen.set_focus(None)
            tabs.active = tab
        return await self._focus_view(tab)

    async def view(self, tab: str) -> View:
        """The view in a tab, built and mounted the first time it is asked for."""
        pane = self.query_one(f"TabPane#{tab}", TabPane)
        if not pane.children:
            await pane.mount(self._build_view(tab))
        return pane.children[0]  # type: ignore[return-value]

    def _build_view(self, tab: str) -> View:
        if tab == "guards":
            return GuardsPane(self.capture, hide_volatile=self.hide_volatile)
        if tab == "numerics":
            assert self.run_view.numerics is not None  # the tab is there only then
            return NumericsPane(self.capture, self.run_view.numerics)
        views: dict[str, type[CompilesPane | BreaksPane | KernelsPane]] = {
            "compiles": CompilesPane, "breaks": BreaksPane, "kernels": KernelsPane}
        return views[tab](self.capture)

    async def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id is not None and event.pane.is_attached:
            await self._focus_view(event.pane.id)

    async def action_focus_view(self) -> None:
        await self._focus_view(self.query_one("#tabs", TabbedContent).active)

    async def _focus_view(self, tab: str) -> View:
        view = await self.view(tab)

        def focus_if_still_shown() -> None:
            # A focus meant for a tab the user has since left would make TabbedContent switch
            # back to it, whose own deferred focus then switches again: the two tabs took turns
            # for seconds at full CPU before one won.
            if self.query_one("#tabs", TabbedContent).active == tab:
                view.focus_main()

        # After the switch is laid out: a hidden widget can't take focus.
        self.call_after_refresh(focus_if_still_shown)
        return view

    # -- requests from the views ------------------------------------------------------------

    async def on_show_break(self, message: ShowBreak) -> None:
        view = await self.switch_to("breaks")
        assert isinstance(view, BreaksPane)
        view.show(message.event_id)

    async def on_show_stage(self, message: ShowStage) -> None:
        view = await self.switch_to("compiles")
        assert isinstance(view, CompilesPane)
        view.show(message.compile_id, message.stage_key, message.node)

    async def on_show_guards(self, message: ShowGuards) -> None:
        view = await self.switch_to("guards")
        assert isinstance(view, GuardsPane)
        view.show(message.compile_id)

    async def on_show_kernel(self, message: ShowKernel) -> None:
        view = await self.switch_to("kernels")
        assert isinstance(view, KernelsPane)
        view.show(message.compile_id, message.kernel_key)

    def on_show_source(self, message: ShowSource) -> None:
        self.push_screen(SourceScreen(message.file, message.line, self.sources, message.code))

    def go_to_hit(self, hit: Hit | None) -> None:
        if hit is None:
            return
        if hit.kind == "graph_break" and hit.event_id is not None:
            self.post_message(ShowBreak(hit.event_id))
        elif hit.kind == "recompile" and hit.compile_id:
            self.post_message(ShowGuards(hit.compile_id))
        elif hit.kind == "kernel" and hit.compile_id and hit.stage_key:
            self.post_message(ShowKernel(hit.compile_id, hit.stage_key))
        elif hit.compile_id:
            self.post_message(ShowStage(hit.compile_id, hit.stage_key, hit.name))

    # -- keys -------------------------------------------------------------------------------

    def action_search(self) -> None:
        self.push_screen(SearchScreen(self.capture), self.go_to_hit)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(numerics=self.run_view.numerics is not None))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's commands, its screenshot replaced by one that saves where it says (Textual's
        own delivers to a Downloads folder that may not exist, then says only that it failed)."""
        for command in super().get_system_commands(screen):
            if command.title == "Screenshot":
                yield SystemCommand("Screenshot", f"Save an SVG of this screen in {self.screenshot_directory()}",
                                    lambda: self.set_timer(0.1, self.action_save_screenshot))
            else:
                yield command

    def screenshot_directory(self) -> str:
        return one_line(os.path.dirname(os.path.abspath(self.capture.path)))

    def action_save_screenshot(self) -> None:
        directory = os.path.dirname(os.path.abspath(self.capture.path))
        name = f"{Path(self.capture.path).stem}-{time.strftime('%Y%m%d-%H%M%S')}.svg"
        try:
            path = self.save_screenshot(filename=name, path=directory)
        except OSError as e:
            self.notify(one_line(f"Screenshot not saved: {os.path.join(directory, name)}: {e.strerror or e}"),
                        title="Screenshot", severity="error", markup=False)
            return
        self.notify(one_line(f"Saved {path}"), title="Screenshot", markup=False)

    def action_export(self) -> None:
        if self.export_html is None:
            self.notify("The HTML reporter is not available in this installation.", severity="warning", markup=False)
            return
        out = str(Path(self.capture.path).with_suffix(".html"))
        replaced = Path(out).exists()
        self.notify(one_line(f"Writing {out}{' (replacing the report already there)' if replaced else ''}…"),
                    markup=False)
        self._export(out, replaced)

    @work(thread=True, exclusive=True, group="export")
    def _export(self, out: str, replaced: bool = False) -> None:
        assert self.export_html is not None
        try:
            self.export_html(out)
        except DynscopeError as e:
            self.call_from_thread(self.notify, one_line(f"Export failed: {e}"), severity="error", markup=False)
        else:
            self.call_from_thread(self.notify, one_line(f"{'Replaced' if replaced else 'Wrote'} {out}"), markup=False)
