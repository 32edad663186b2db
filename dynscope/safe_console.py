"""The terminal's console: rich, with every capture string made harmless (dynscope/safe_text.py)."""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment

from dynscope.safe_text import needs_escaping, visible


class SafeConsole(Console):
    """A rich Console whose rendered text never carries control characters from content.

    Rich adds its own styling codes after rendering, as control segments, so escaping the
    content segments here leaves colours intact and covers every renderable at once. Links
    are dropped: dynscope makes none on a terminal, so a link can only come from markup in a
    capture string, and it would be an OSC 8 sequence pointing anywhere.
    """

    def render(self, renderable, options=None):
        for segment in super().render(renderable, options):
            if segment.control is not None:
                yield segment
                continue
            style = segment.style
            if style is not None and style.link:
                style = style.update_link(None)
            if needs_escaping(segment.text) or style is not segment.style:
                yield Segment(visible(segment.text), style)
            else:
                yield segment


def safe_console(**options) -> Console:
    console = SafeConsole(**options)
    if "soft_wrap" not in options and not console.is_terminal:
        # Piped, or in a CI log: no hard line breaks at 80 columns; the reader's viewer wraps.
        console.soft_wrap = True
    return console
