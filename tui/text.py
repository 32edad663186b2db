"""Turning capture strings into things Textual shows, always as literal text.

Capture strings (break messages, guard checks, stage text) can contain anything, including
"[bold]" or "[/]": they are wrapped in rich ``Text`` and never parsed as markup, and their
control characters are shown as escapes (dynscope.safe_text).
"""

from __future__ import annotations

from rich.syntax import Syntax
from rich.text import Text

from dynscope.model.break_text import first_line as _first_line
from dynscope.model.stages import lexer_for
from dynscope.safe_text import visible

# Beyond this size Pygments takes longer than a key press should: show plain text.
MAX_HIGHLIGHT_CHARS = 400_000
# ansi_dark styles tokens without painting a background, so the panel's own background shows.
THEME = "ansi_dark"


def plain(value: object, style: str = "") -> Text:
    """Any value as literal text (no markup, no emoji codes)."""
    return Text("" if value is None else visible(str(value)), style=style)


def line(*parts: str | tuple[str, str] | Text) -> Text:
    """One line from parts: a str, a (str, style) pair, or a Text. Never parses markup."""
    text = Text()
    for part in parts:
        if isinstance(part, tuple):
            text.append(visible(part[0]), *part[1:])
        elif isinstance(part, str):
            text.append(visible(part))
        else:
            text.append(part)
    return text


def lines_of(*rows: Text) -> Text:
    return Text("\n").join(rows)


def code_lines(code: str, language: str, *, lexer: str | None = None) -> list[Text]:
    """Source split into highlighted lines (``language`` as the model names it: fx, cpp, triton...)."""
    code = visible(code.expandtabs(4).rstrip("\n"))
    if len(code) > MAX_HIGHLIGHT_CHARS:
        return [Text(row) for row in code.split("\n")]
    highlighted = Syntax(code, lexer or lexer_for(language), theme=THEME).highlight(code)
    return highlighted.split("\n", allow_blank=True)[: code.count("\n") + 1]


def first_line(text: str | None, width: int | None = None) -> str:
    """dynscope's one first_line (dynscope.model.break_text), clipped to ``width``."""
    first = _first_line(text)
    return clip(first, width) if width else first


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def count(n: int, noun: str) -> str:
    """'1 compile', '3 compiles'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} s"
