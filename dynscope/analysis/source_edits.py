"""Changes to source files as ``dynscope fix`` tries, merges and writes them (torch-free).

A ``SourceEdit`` is one file's text before and after a change (a rewrite from the catalogue,
dynscope/rewrites), with the name the file has in a diff: relative to the program's tree, or
``<package>/...`` for a file of an installed library. Several edits of one file (the combined
run's rewrites) merge into one text against the common original, each change a replacement of
original lines: changes that touch the same lines conflict, and the first is kept.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dynscope.rewrites.bounded import RewriteBudget


@dataclass(frozen=True)
class SourceFile:
    """A file a rewrite may read, as the reader allowed it (dynscope/fix/source_reader.py)."""

    path: str  # absolute, resolved
    text: str
    shown: str  # its name in a diff: relative to the program's tree, or <package>/... in a library
    package: str | None = None  # the installed distribution the file belongs to; None: the program's own file
    version: str | None = None  # that distribution's version
    # the rewrite step's share of fix's --budget, and where a declined rewrite is said (the reader sets it)
    budget: RewriteBudget | None = None

    @property
    def library(self) -> str | None:
        """``transformers 5.24.0``: the installed package, in words; None for the program's own file."""
        if self.package is None:
            return None
        return f"{self.package} {self.version}" if self.version else self.package


@dataclass(frozen=True)
class SourceEdit:
    """One file's text before and after a change."""

    file: SourceFile
    new: str

    @property
    def old(self) -> str:
        return self.file.text

    def diff(self) -> str:
        """The change as a unified diff ``git apply`` takes (``a/`` and ``b/`` prefixes)."""
        return unified_diff(self.file.shown, self.old, self.new)


def unified_diff(shown: str, old: str, new: str) -> str:
    out: list[str] = []
    for line in difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                     f"a/{shown}", f"b/{shown}"):
        # A last line without a newline: say so, as git does, so `git apply` takes the diff.
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def line_map(old: str, new: str) -> dict[int, int]:
    """Each line (1-based) of ``new`` -> the line of ``old`` it stands for: a line kept, the same
    line; a line a change wrote, the first line that change replaced (or the line it was put
    before). A trial of changed source records its breaks at the new lines; fix judges them at
    the old ones."""
    a, b = old.splitlines(), new.splitlines()
    mapped: dict[int, int] = {}
    for tag, i1, _i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        for k in range(j2 - j1):
            mapped[j1 + k + 1] = (i1 + k + 1) if tag == "equal" else min(i1 + 1, max(len(a), 1))
    return mapped


@dataclass(frozen=True)
class _Change:
    start: int  # first original line replaced (0-based)
    end: int  # one past the last (start == end: an insertion before line ``start``)
    lines: tuple[str, ...]


def _changes(old: list[str], new: list[str]) -> list[_Change]:
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    return [_Change(i1, i2, tuple(new[j1:j2])) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _overlap(a: _Change, b: _Change) -> bool:
    """Both change the same original lines, or insert at the same place, or one inserts inside the other's range."""
    if a.start == a.end and b.start == b.end:
        return a.start == b.start
    return a.start < b.end and b.start < a.end if a.start != a.end and b.start != b.end else \
        (b.start < a.start < b.end if a.start == a.end else a.start < b.start < a.end)


@dataclass(frozen=True)
class Merged:
    edits: tuple[SourceEdit, ...]  # one per file, in first-seen order
    kept: tuple[int, ...]  # indexes (into the input) of the edits merged in
    conflicts: tuple[str, ...]  # one line per edit left out: which and why


def merge(edits: Sequence[SourceEdit], names: Sequence[str] | None = None) -> Merged:
    """The edits applied one after another, per file, against the file's original text. An edit
    whose changes touch lines an earlier edit changed is left out whole (named by ``names[i]``);
    a change two edits make identically (an ``import torch`` both add) is made once."""
    by_file: dict[str, tuple[SourceFile, list[_Change]]] = {}
    kept: list[int] = []
    conflicts: list[str] = []
    for i, edit in enumerate(edits):
        base, taken = by_file.setdefault(edit.file.path, (edit.file, []))
        if base.text != edit.old:
            conflicts.append(f"{_name(names, i, edit)}: made from another text of {edit.file.shown}; left out")
            continue
        mine = _changes(base.text.splitlines(keepends=True), edit.new.splitlines(keepends=True))
        fresh = [c for c in mine if c not in taken]
        clash = next((t for c in fresh for t in taken if _overlap(c, t)), None)
        if clash is not None:
            conflicts.append(f"{_name(names, i, edit)}: changes line {clash.start + 1} of {edit.file.shown}, which an "
                             "earlier change changed; left out (the first is kept)")
            continue
        taken.extend(fresh)
        kept.append(i)
    merged: list[SourceEdit] = []
    for base, changes in by_file.values():
        if not changes:
            continue
        lines = base.text.splitlines(keepends=True)
        for change in sorted(changes, key=lambda c: (c.start, c.end), reverse=True):
            lines[change.start:change.end] = list(change.lines)
        merged.append(SourceEdit(base, "".join(lines)))
    return Merged(tuple(merged), tuple(kept), tuple(conflicts))


def _name(names: Sequence[str] | None, i: int, edit: SourceEdit) -> str:
    return names[i] if names is not None and i < len(names) else f"the change to {edit.file.shown}"
