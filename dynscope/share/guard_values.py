"""String values in guards, in a shared bundle: ``G['TOKEN'] == 'sk-…'`` becomes ``G['TOKEN'] == '<value:HASH>'``.

Dynamo guards a string global or attribute by its value (``EQUALS_MATCH``), and says so in the guard
tree (``dynamo_cpp_guards_str``, kept even with ``--drop-stages``: it is not a stage) and in every
recompile reason (``1/0: self.mode == 'sum'``). A string compared there can be anything the program
held: a mode name, or a key. share replaces each string literal on either side of ``==``/``!=``
with a salted hash of it, and so is the value a guard failure saw (its ``actual`` field, a repr),
so two different values still read as different within one bundle (a
recompile between ``'sum'`` and ``'max'`` stays visible) and a guessed value cannot be confirmed.
``--keep-guard-values`` keeps them. Numbers, shapes and type checks are not touched.
"""

from __future__ import annotations

import hashlib
import re

# A Python string literal (optionally b/r/u-prefixed) on one line. After ``==`` (where torch writes the
# value) it may be of any length and hold escapes: only an operator starts one. Before ``==`` any quote
# could start one, so there it ends at the next quote of its kind and is at most 256 characters: a
# stranger's megabyte of quotes and backslashes costs one pass.
_RIGHT = r"""[bBrRuU]{0,2}(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")"""
_LEFT = r"""[bBrRuU]{0,2}(?:'[^'\n]{0,256}'|"[^"\n]{0,256}")"""
_COMPARED = re.compile(rf"((?:==|!=)\s*)({_RIGHT})|({_LEFT})(?=\s*(?:==|!=))")


class GuardValueScrubber:
    def __init__(self, salt: bytes) -> None:
        self._salt = salt
        self.replaced = 0

    def token(self, literal: str) -> str:
        value = literal.lstrip("bBrRuU")[1:-1]  # 'sum' and "sum" are one value
        digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=4, key=self._salt).hexdigest()
        return f"'<value:{digest}>'"

    def literal(self, text: str) -> str:
        """A field that holds one value's repr (a guard failure's ``actual``): its token when it is a
        string literal (``'max'``), else as it is (``2``, ``torch.float32``)."""
        if re.fullmatch(_RIGHT, text.strip()) is None or "<value:" in text:
            return text
        self.replaced += 1
        return self.token(text.strip())

    def scrub(self, text: str) -> str:
        if "==" not in text and "!=" not in text:
            return text
        return _COMPARED.sub(self._replace, text)

    def _replace(self, m: re.Match[str]) -> str:
        if m.group(2) is not None:
            before, literal, after = m.group(1), m.group(2), ""
        else:
            before, literal, after = "", m.group(3), ""
        if literal.strip("'\"bBrRuU").startswith("<value:"):
            return m.group(0)
        self.replaced += 1
        return before + self.token(literal) + after
