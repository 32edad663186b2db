"""The graph breaks view: distinct breaks with counts; the selected one explained, with its
user stack and the source around the line where it happened."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.names import friendly_function, location
from dynscope.analysis.run_view import run_view
from dynscope.model import Capture, StackFrame
from dynscope.tui.code_view import CodeView
from dynscope.tui.messages import ShowSource
from dynscope.tui.text import code_lines, line, lines_of, plain

if TYPE_CHECKING:
    from dynscope.tui.app import DynscopeApp


class BreaksPane(Horizontal):
    def __init__(self, capture: Capture) -> None:
        super().__init__()
        self.capture = capture
        self.groups: list[BreakGroup] = []

    def compose(self) -> ComposeResult:
        yield OptionList(id="break-list")
        with Vertical(id="break-detail"):
            with VerticalScroll(id="break-info-scroll"):
                yield Static(id="break-info")
            yield OptionList(id="break-stack")
            yield CodeView(id="break-source")

    @property
    def selected(self) -> BreakGroup | None:
        index = self.query_one("#break-list", OptionList).highlighted
        return self.groups[index] if index is not None and self.groups else None

    def on_mount(self) -> None:
        self.groups = run_view(self.capture).break_groups
        listing = self.query_one("#break-list", OptionList)
        if not self.groups:
            listing.add_option(Option(plain("No graph breaks: every compiled frame was traced whole."), disabled=True))
            return
        cwd = self.capture.run.cwd
        listing.add_options(Option(group_prompt(g, cwd), id=str(i)) for i, g in enumerate(self.groups))
        listing.highlighted = 0

    def focus_main(self) -> None:
        self.query_one("#break-list", OptionList).focus()

    def show(self, event_id: int) -> None:
        for i, g in enumerate(self.groups):
            if any(b.event_id == event_id for b in g.occurrences):
                self.query_one("#break-list", OptionList).highlighted = i
                return

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option_list.id == "break-list" and self.groups:
            self._show_group(self.groups[event.option_index])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        group = self.selected
        if group is None:
            return
        if event.option_list.id == "break-list":
            frame = group.location  # enter on a break: straight to its line
        else:
            frame = group.first.user_stack[event.option_index]
        self.post_message(ShowSource(frame.file, frame.line, frame.code))

    def _show_group(self, group: BreakGroup) -> None:
        cwd = self.capture.run.cwd
        self.query_one("#break-info", Static).update(group_details(group, cwd))
        stack = self.query_one("#break-stack", OptionList)
        stack.clear_options()
        stack.add_options(Option(frame_prompt(f, cwd)) for f in group.first.user_stack)
        stack.highlighted = len(group.first.user_stack) - 1 if group.first.user_stack else None  # the innermost frame
        where = group.location
        sources = cast("DynscopeApp", self.app).sources
        excerpt = sources.excerpt(where.file, where.line, context=6)
        source = self.query_one("#break-source", CodeView)
        if excerpt is None:
            why = sources.withheld(where.file) or f"cannot read {location(where.file, where.line, cwd)} from this machine"
            fallback = [plain(f"({why})", "dim")]
            if where.code:
                fallback.append(plain(where.code))
            source.show(fallback, numbers=False)
            return
        lines = code_lines("\n".join(text for _, text in excerpt.lines), "python")
        source.show(lines, first_number=excerpt.lines[0][0], mark=excerpt.line)


def group_prompt(g: BreakGroup, cwd: str | None) -> Text:
    head = line((f"×{g.count} ", "bold"), (g.headline, "bold yellow"))
    return lines_of(head, plain(f"   {location(g.location.file, g.location.line, cwd)}", "cyan"))


def group_details(g: BreakGroup, cwd: str | None) -> Text:
    where = g.location
    rows = [line((g.headline, "bold yellow"), (f"  {g.gb_id}" if g.gb_id else "", "dim"),
                 (f"  ×{g.count}", "bold")),
            line((location(where.file, where.line, cwd), "cyan"),
                 (f" in {friendly_function(where.function)}", "dim"))]
    if where.code:
        rows.append(plain(f"  {where.code.strip()}", "bold"))
    rows.append(plain(""))
    rows.append(plain(g.explanation or g.reason))
    for hint in g.hints:
        rows.append(plain(f"hint: {hint}", "green"))
    if g.first.developer_context:
        rows.append(line(("developer context: ", "dim"), (g.first.developer_context.strip(), "dim")))
    facts = []
    if g.compile_ids:
        facts.append("in compile " + ", ".join(g.compile_ids[:8]) + (" …" if len(g.compile_ids) > 8 else ""))
    if g.resumed_into:
        facts.append("continues in " + ", ".join(friendly_function(r) for r in g.resumed_into[:3]))
    if facts:
        rows.append(plain(" · ".join(facts), "dim"))
    if g.doc_link:
        rows.append(line(("docs: ", "dim"), (g.doc_link, "underline")))
    return lines_of(*rows)


def frame_prompt(frame: StackFrame, cwd: str | None) -> Text:
    prompt = line((location(frame.file, frame.line, cwd), "cyan"), (f" in {friendly_function(frame.function)}", "dim"))
    if frame.code:
        prompt.append(plain(f"  {frame.code.strip()}"))
    return prompt
