"""A read-only code panel with line numbers and one marked line.

Stage texts and output code run to hundreds of kilobytes, so this renders only the lines on
screen (Textual's line API) instead of laying out the whole text as one widget.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

_MARK_STYLE = Style(bgcolor="grey30")


class CodeView(ScrollView, can_focus=True, inherit_bindings=False):
    """Lines of (highlighted) text. ←/→ are left to the screen (the stage stepper steps with
    them); shift+←/→ scroll sideways."""

    BINDINGS = [
        Binding("up", "scroll_up", "Up", show=False),
        Binding("down", "scroll_down", "Down", show=False),
        Binding("shift+left", "scroll_left", "Left", show=False),
        Binding("shift+right", "scroll_right", "Right", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "scroll_home", "Top", show=False),
        Binding("end", "scroll_end", "Bottom", show=False),
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: list[Text] = []
        self._first_number = 1
        self._numbers = True
        self._mark: int | None = None
        self._cache: LRUCache[tuple, Strip] = LRUCache(1024)

    # -- what tests and callers read -------------------------------------------------------

    @property
    def text(self) -> str:
        return "\n".join(line.plain for line in self._lines)

    @property
    def marked_line(self) -> int | None:
        """The marked line's number (as shown in the gutter), if any."""
        return self._mark

    def line_text(self, number: int) -> str:
        return self._lines[number - self._first_number].plain

    # -- showing ---------------------------------------------------------------------------

    def show(self, lines: list[Text], *, first_number: int = 1, mark: int | None = None, numbers: bool = True) -> None:
        self._lines = lines
        self._first_number = first_number
        self._numbers = numbers
        self._mark = mark
        self._cache.clear()
        width = max((line.cell_len for line in lines), default=0)
        self.virtual_size = Size(width + self._gutter_width(), len(lines))
        self.scroll_to(0, 0, animate=False, immediate=True)
        if mark is not None:
            # Scroll once the new size is laid out, or the scroll is clamped to the old one.
            self.call_after_refresh(self.scroll_to_line, mark)
        self.refresh()

    def scroll_to_line(self, number: int, retries: int = 3) -> None:
        index = number - self._first_number
        target = max(0, index - self.size.height // 3)
        self.scroll_to(y=target, animate=False, immediate=True)
        # Under load the first refresh can come before the new size is laid out, and the scroll is
        # clamped to the old one (seen in CI: the view stayed at the top, the mark out of sight).
        reachable = min(target, max(0, len(self._lines) - self.size.height))
        if self.scroll_y < reachable and retries > 0 and number == self._mark:
            self.call_after_refresh(self.scroll_to_line, number, retries - 1)

    # -- rendering -------------------------------------------------------------------------

    def _gutter_width(self) -> int:
        if not self._numbers:
            return 0
        return len(str(self._first_number + len(self._lines))) + 3  # mark, digits, " │"

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.size.width
        if index >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        key = (index, scroll_x, width)
        if key not in self._cache:
            self._cache[key] = self._render_row(index, scroll_x, width)
        return self._cache[key]

    def _render_row(self, index: int, scroll_x: int, width: int) -> Strip:
        console = self.app.console
        number = self._first_number + index
        marked = number == self._mark
        gutter_width = self._gutter_width()
        strips = []
        if self._numbers:
            digits = gutter_width - 3
            gutter = Text("▶" if marked else " ", style="bold yellow")
            gutter.append(f"{number:>{digits}} │", style="bold yellow" if marked else "grey50")
            strips.append(Strip(list(gutter.render(console)), gutter_width))
        line = self._lines[index]
        code = Strip(list(line.render(console)), line.cell_len)
        code = code.crop_extend(scroll_x, scroll_x + max(width - gutter_width, 0), None)
        if marked:
            code = code.apply_style(_MARK_STYLE)
        strip = Strip.join(strips + [code]) if strips else code
        return strip.apply_style(self.rich_style)
