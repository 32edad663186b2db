"""Commands for Textual's command palette (ctrl+p): the views, and every compile and graph break."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Matcher, Provider
from textual.content import Content
from textual.markup import escape

from dynscope.analysis.names import friendly_function, location
from dynscope.analysis.run_view import run_view
from dynscope.safe_text import visible
from dynscope.tui.messages import ShowBreak, ShowStage

if TYPE_CHECKING:
    from dynscope.tui.app import DynscopeApp

Command = tuple[str, Callable[[], object], str]  # (name, what it does, help)


class DynscopeCommands(Provider):
    @property
    def dynscope(self) -> DynscopeApp:
        return self.app  # type: ignore[return-value]

    def _views(self) -> Iterator[Command]:
        app = self.dynscope
        for tab, title in app.TABS:
            yield f"Go to {title}", partial(app.switch_to, tab), f"show the {title} view"
        yield "Search the capture", app.action_search, "reasons, FX node names and ops, kernel names"
        yield "Export the HTML report", app.action_export, "write the report next to the capture"
        yield "Help", app.action_help, "keys and views"

    def _records(self) -> Iterator[Command]:
        app = self.dynscope
        capture = app.capture
        cwd = capture.run.cwd
        view = run_view(capture)
        for c in view.compiles:
            name = visible(f"Compile {c.compile_id} {friendly_function(c.function)} ({c.status})")
            yield name, partial(app.post_message, ShowStage(c.compile_id)), escape(visible(location(c.file, c.line, cwd)))
        for g in view.break_groups:
            name = visible(f"Graph break: {g.headline} ×{g.count}")
            where = location(g.location.file, g.location.line, cwd)
            yield name, partial(app.post_message, ShowBreak(g.first.event_id)), escape(visible(where))

    def _system(self, *, discoverable_only: bool) -> Iterator[Command]:
        """Textual's own commands (keys, theme, screenshot, quit), after dynscope's."""
        for command in self.dynscope.get_system_commands(self.screen):
            if command.discover or not discoverable_only:
                yield command.title, command.callback, command.help

    async def discover(self) -> Hits:
        for name, callback, help_text in [*self._views(), *self._system(discoverable_only=True)]:
            yield DiscoveryHit(Content(name), callback, text=name, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in [*self._views(), *self._records(), *self._system(discoverable_only=False)]:
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, highlighted(matcher, name), callback, text=name, help=help_text)


def highlighted(matcher: Matcher, candidate: str) -> Content:
    """The candidate with the matched characters styled; never parsed as markup (a break's
    headline may contain "[...]"), unlike Matcher.highlight."""
    content = Content(candidate)
    _, offsets = matcher.fuzzy_search.match(matcher.query, candidate)
    for offset in offsets:
        content = content.stylize("reverse", offset, offset + 1)
    return content
