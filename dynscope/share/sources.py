"""Source text in a shared bundle: every line of the program's code becomes ``<source:HASH>``.

A capture quotes source in many places, in torch's formats: stack frames (``loc``, ``code``),
tracebacks (``File "m.py", line 3, in f`` and the line under it), FX graph code comments
(``# File: m.py:3 in f, code: y = x + 1``), guard comments (``# y = x + 1  # m.py:3 in f``), kernel
provenance and explanations that quote a line. Two passes take them out:

1. the places whose format says "this is a source line" are replaced whatever the line is,
   and each line found there is remembered;
2. every remembered line, and every line of the program's files this machine can read (the
   files the capture names, under the reader's source roots), is replaced wherever else it
   appears (a bytecode dump, an error message, a format torch adds later). This pass skips lines
   shorter than ``MIN_LINE_CHARS`` and bare imports (``return x``, ``import torch``): they are
   not the model's secrets, and generated code is full of them.

The hash is salted per bundle (like paths), so it only tells equal lines apart within it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

MIN_LINE_CHARS = 10
# Torch's formats are looked for only on lines up to this long: their patterns scan a line once
# per "#" or "File" in it, and a stranger's single-line megabyte must not make that quadratic.
MAX_FORMAT_LINE_CHARS = 4096
# Remembered lines up to this long are found by one trie-shaped pattern (one pass over the text,
# whatever their number); longer ones, rare, by a plain search each.
_TRIE_LINE_CHARS = 256
_IMPORT = re.compile(r"(?:import\s+[\w.]+(?:\s+as\s+\w+)?|from\s+[\w.]+\s+import\s+[\w., ()*]+)")

# "  File "m.py", line 3, in f" and the source line Python prints under it.
_TRACEBACK = re.compile(r'(?m)^([ \t]*File "[^"\n]*", line \d+, in [^\n]*\n[ \t]+)(?!File ")([^\n]+)$')
# FX graph code and Dynamo's explanations: "# File: m.py:3 in f, code: SRC", '# File "m.py", line 3, in f, code: SRC'.
_FX_CODE = re.compile(r"(?m)(File[^\n]*?, code: )([^\n]*)$")
# Guard comments: "CHECK  # SRC  # m.py:3 in f" (the second comment says where the first came from).
_GUARD = re.compile(r"(?m)(#[ \t]+)([^\n]+?)([ \t]+#[ \t]+[^\s#]+:\d+ in [^\n]*)$")
# Caret lines under a traceback's source line ("    ^^^^^^") are kept: they hold no text.


class SourceScrubber:
    def __init__(self, salt: bytes) -> None:
        self._salt = salt
        self._lines: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._long: list[str] = []
        self.replaced = 0  # source lines taken out (counted where found)

    def token(self, line: str) -> str:
        digest = hashlib.blake2b(line.strip().encode("utf-8", "surrogatepass"), digest_size=4, key=self._salt).hexdigest()
        return f"<source:{digest}>"

    def remember(self, lines: Iterable[str]) -> None:
        """Lines to take out wherever they appear (pass 2)."""
        before = len(self._lines)
        for line in lines:
            text = line.strip()
            if len(text) >= MIN_LINE_CHARS and not _IMPORT.fullmatch(text):
                self._lines.add(text)
        if len(self._lines) != before:
            self._pattern = None
            self._long = []

    def drop_field(self, value: str) -> str:
        """A field that holds one source line (a frame's ``loc``): its token, or "" for none."""
        if not value.strip():
            return value
        self.remember([value])
        self.replaced += 1
        return self.token(value)

    def find_quoted(self, text: str) -> None:
        """Remember the lines ``text`` quotes in torch's formats (pass 1 finds them all first,
        so that pass 2 can take a line out of a payload read before the one that quoted it)."""
        bounded = _short_lines(text)
        for pattern in (_TRACEBACK, _FX_CODE, _GUARD):
            self.remember(m.group(2) for m in pattern.finditer(bounded))

    def scrub(self, text: str) -> str:
        """``text`` with every quoted line and every remembered line replaced by its token."""
        if _short_lines(text) == text:
            for pattern in (_TRACEBACK, _FX_CODE, _GUARD):
                text = pattern.sub(self._quoted, text)
        else:  # a line too long for the format patterns: the others are still looked at
            text = "\n".join(line if len(line) > MAX_FORMAT_LINE_CHARS else self.scrub(line)
                             for line in text.split("\n"))
        if self._lines:
            if self._pattern is None and not self._long:
                short = [line for line in self._lines if len(line) <= _TRIE_LINE_CHARS]
                self._long = sorted((line for line in self._lines if len(line) > _TRIE_LINE_CHARS), key=len, reverse=True)
                self._pattern = re.compile(trie_pattern(short)) if short else None
            for line in self._long:
                if line in text:
                    self.replaced += text.count(line)
                    text = text.replace(line, self.token(line))
            if self._pattern is not None:
                text = self._pattern.sub(self._remembered, text)
        return text

    def _quoted(self, m: re.Match[str]) -> str:
        if m.group(2).startswith("<source:"):
            return m.group(0)
        self.replaced += 1
        return m.group(1) + self.token(m.group(2)) + (m.group(3) if m.lastindex == 3 else "")

    def _remembered(self, m: re.Match[str]) -> str:
        self.replaced += 1
        return self.token(m.group(0))


def _short_lines(text: str) -> str:
    """``text`` without its lines longer than MAX_FORMAT_LINE_CHARS (the text itself when it has none)."""
    if len(text) <= MAX_FORMAT_LINE_CHARS or all(len(line) <= MAX_FORMAT_LINE_CHARS for line in text.split("\n")):
        return text
    return "\n".join(line for line in text.split("\n") if len(line) <= MAX_FORMAT_LINE_CHARS)


def trie_pattern(lines: Iterable[str]) -> str:
    """One regular expression matching any of ``lines``, longest first, shaped as a trie: Python's
    engine tries an alternation's branches one by one at every position, so a flat
    ``a|b|c…`` of thousands of lines would cost thousands of tries per character."""
    trie: dict[str, dict] = {}  # type: ignore[type-arg]  # a trie's nodes nest without end
    for line in lines:
        node = trie
        for ch in line:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, dict]) -> str:  # type: ignore[type-arg]
        ends = "" in node
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 and not ends else "(?:" + "|".join(branches) + ")"
        return body + "?" if ends else body

    return build(trie)
