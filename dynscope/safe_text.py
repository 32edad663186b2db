"""Strings from a capture, made harmless for a terminal.

A capture can come from anyone, and its strings (break messages, file names, guard text,
generated code) reach terminals through rich and Textual. Control characters there are
commands, not text: ``\\x1b[2J`` clears the screen, ``\\x1b]0;...\\x07`` retitles the window,
``\\x1b]8;;url\\x07`` plants a link, and bidi overrides reorder what the eye reads. Every one
of them is shown here as a visible escape instead (``\\x1b``), keeping newlines and tabs.
Markup is the views' part: they wrap capture strings in rich ``Text``, never parse them.
"""

from __future__ import annotations

import re

from rich.console import Console
from rich.segment import Segment

# C0 controls but tab and newline, DEL, C1 controls, and the bidi embedding/override/isolate
# characters.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every terminal control character written out as an escape."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


class SafeConsole(Console):
    """A rich Console whose rendered text never carries control characters from content.

    Rich adds its own styling codes after rendering, as control segments, so escaping the
    content segments here leaves colours intact and covers every renderable at once.
    """

    def render(self, renderable, options=None):  # type: ignore[override]
        for segment in super().render(renderable, options):
            if segment.control is None and _UNSAFE.search(segment.text):
                yield Segment(visible(segment.text), segment.style)
            else:
                yield segment


def safe_console(**options) -> Console:
    console = SafeConsole(**options)
    if "soft_wrap" not in options and not console.is_terminal:
        # Piped, or in a CI log: no hard line breaks at 80 columns; the reader's viewer wraps.
        console.soft_wrap = True
    return console
