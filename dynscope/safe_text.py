"""Strings from a capture, made harmless for whatever shows them: the one escaping rule.

A capture (or a TORCH_TRACE log) can come from anyone, and its strings (break messages, file
names, guard text, generated code, the recorded command) reach terminals, CI logs, Markdown
and HTML viewers. Control characters there are commands, not text: ``\\x1b[2J`` clears the
screen, ``\\x1b]0;...\\x07`` retitles the window, ``\\x1b]8;;url\\x07`` plants a link,
``\\x1b]52;c;...`` writes the clipboard, ``\\x9b`` is a CSI to an 8-bit terminal, and bidi
overrides reorder what the eye reads. The rule, for every output:

- text for people (terminal, TUI, Markdown, HTML, DOT, JUnit, GitHub annotations, messages on
  stderr) shows each such character as a visible escape (``\\x1b``, ``\\u202e``) -- ``visible``;
  newlines and tabs are kept where the format allows them (``one_line`` where it does not);
- JSON documents keep the text faithfully, each such character as a ``\\uXXXX`` escape --
  ``json_text``;
- each format's own syntax is neutralised on top: rich markup (views build ``Text``, never parse
  capture strings; dynscope/safe_console.py's console drops links), Markdown and HTML
  (``markdown_text``, ``markdown_code``), GitHub workflow commands (``github_data``,
  ``github_property``).

No rich here: a JSON document, a Markdown report or a one-line error needs none of it.
"""

from __future__ import annotations

import json
import re

# C0 controls but tab and newline, DEL, C1 controls, the bidi marks, embeddings, overrides and
# isolates, and lone surrogates (JSON can carry "\\ud800"; no output encoding can write it).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character written out as an escape (newline and tab kept)."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def needs_escaping(text: str) -> bool:
    """Whether ``visible`` would change ``text``."""
    return _UNSAFE.search(text) is not None


def one_line(text: str) -> str:
    """``visible`` on one line: for messages (stderr, a notification) that must stay one line."""
    return visible(text).replace("\n", "\\n").replace("\t", " ")


def visible_strings(value):
    """Every string in a JSON-like value made ``visible`` (data a page shows as text)."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, list | tuple):
        return [visible_strings(v) for v in value]
    if isinstance(value, dict):
        return {k: visible_strings(v) for k, v in value.items()}
    return value


def json_text(value, **options) -> str:
    """A JSON document whose strings carry no raw control character: ASCII only, so every
    control, bidi and non-ASCII character (a lone surrogate too) is a ``\\uXXXX`` escape."""
    return json.dumps(value, ensure_ascii=True, **options)


# -- Markdown -----------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~<>])")


def markdown_text(value: str) -> str:
    """Markdown-inert text: HTML characters as entities, Markdown punctuation escaped (no raw
    HTML, no links, no emphasis), control characters visible."""
    value = visible(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", value)


_PROSE_CODE = re.compile(r"`([^`\n|]+)`")  # `print` in torch's prose: a code span (not one holding a pipe)


def markdown_prose(value: str) -> str:
    """``markdown_text``, except that what the text itself puts in backticks (torch's messages
    write `print`, `torch.cond`) becomes a code span, shown as code rather than as escaped
    backticks; everything else stays inert."""
    out: list[str] = []
    at = 0
    for span in _PROSE_CODE.finditer(value):
        out.append(markdown_text(value[at:span.start()]))
        out.append(markdown_code(span.group(1)))
        at = span.end()
    out.append(markdown_text(value[at:]))
    return "".join(out)


def markdown_code(value: str, *, cell: bool = False) -> str:
    """An inline code span that survives any backticks in the value (and stays on one line).
    A code span is literal: no HTML, no links. In a table cell a pipe must be escaped even
    inside code (GFM splits cells first)."""
    value = visible(value).replace("\n", " ")
    if cell:
        value = value.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") or not value.strip() else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def markdown_fence(value: str) -> str:
    """A fence longer than any run of backticks in ``value``, so the block can't be closed early."""
    return "```" + "`" * max((len(r) - 2 for r in re.findall(r"`{3,}", value)), default=0)


# -- links ---------------------------------------------------------------------------------------

# torch's break messages end with a link to its documentation; a capture can put any text there.
_DOC_URL = re.compile(r"https://(?:meta-pytorch\.github\.io|pytorch\.org|docs\.pytorch\.org)/[A-Za-z0-9._~/#%-]*")


def doc_url(link: str | None) -> str | None:
    """``link`` when it is a plain https URL on torch's documentation sites, else None: the only
    links a report makes from a capture (anything else stays text)."""
    return link if link and _DOC_URL.fullmatch(link) else None


# -- GitHub Actions workflow commands -----------------------------------------------------------


def github_data(value: str) -> str:
    """A workflow command's message: %, CR and LF escaped (so no second command can start on a
    new line), control characters visible."""
    return visible(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(value: str) -> str:
    """A workflow command's property (file=, title=): also ``:`` and ``,``, which end it."""
    return github_data(value).replace(":", "%3A").replace(",", "%2C")
