"""The user's source around a line, read from the reader's disk (paths as the program saw them).

A capture names the files; it must not decide what dynscope reads. A file is read only when
it is Python source (``.py``) inside the reader's tree: the directory dynscope runs in, a
directory the reader names with ``--source-root DIR``, or this Python's own libraries (torch,
transformers: where many breaks happen, and nothing a capture chose). A directory the capture names (its
recorded working directory, its script's directory) counts for nothing, so a capture that
claims to come from a home directory cannot get that home's settings file into a report.
Anything else is withheld, with the option that allows it; ``--any-source`` reads whatever the
capture names. Paths are compared after resolving symlinks and ``..``, so neither can climb out
of a root; only regular files are opened (never a FIFO or a device), and only up to a size.
"""

from __future__ import annotations

import os
import shlex
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dynscope.store.regular import read_regular

if TYPE_CHECKING:
    from dynscope.model import Run

# A source file bigger than this is not read: a view shows a few lines of it, and a capture
# must not make a view read gigabytes.
MAX_SOURCE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Excerpt:
    path: str  # the file that was read
    line: int  # the marked line
    lines: tuple[tuple[int, str], ...]  # (line number, text) around it


def resolve_path(path: str | None, cwd: str | None) -> str | None:
    """A capture's file path made absolute: relative paths are relative to the run's cwd."""
    if not path or path.startswith("<"):
        return None
    if not os.path.isabs(path) and cwd:
        path = os.path.join(cwd, path)
    return path


def reader_roots(source_roots: Iterable[str] = ()) -> tuple[str, ...]:
    """The directories source may be read from: where dynscope runs, each ``--source-root`` and
    this Python's libraries.
    The filesystem root counts only when the reader names it: running dynscope from ``/`` (as
    in many containers) must not open the whole disk to a capture."""
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:  # the directory was removed under us: it holds nothing to read
        cwd = None
    here = [cwd] if cwd and os.path.dirname(cwd) != cwd else []
    return tuple(dict.fromkeys([*here, *(os.path.realpath(p) for p in source_roots), *_library_roots()]))


def _library_roots() -> list[str]:
    """This Python's standard library and site-packages: the reader's own install."""
    paths = sysconfig.get_paths()
    found = (paths.get(name) for name in ("stdlib", "platstdlib", "purelib", "platlib"))
    return [os.path.realpath(p) for p in found if p and os.path.dirname(os.path.realpath(p)) != os.path.realpath(p)]


@dataclass(frozen=True)
class SourceAccess:
    """Which files a view may read: the reader's roots (never a directory the capture names)."""

    cwd: str | None  # the run's recorded working directory: only resolves the capture's relative paths
    roots: tuple[str, ...]
    any_source: bool = False

    @classmethod
    def for_run(cls, run: Run, *, source_roots: Iterable[str] = (), any_source: bool = False) -> SourceAccess:
        return cls(run.cwd, reader_roots(source_roots), any_source)

    def withheld(self, path: str | None) -> str | None:
        """Why ``path`` is not read, saying what would allow it, or None when it may be."""
        resolved = resolve_path(path, self.cwd)
        if resolved is None or self.any_source:
            return None
        real = _real_path(resolved)
        if real is None:
            return f"source withheld: {path} is not a file name"
        if not real.endswith(".py"):
            return f"source withheld: {path} is not Python source (.py); --any-source reads it"
        if not any(_inside(real, root) for root in self.roots):
            return (f"source withheld: {path} is outside the source roots; "
                    f"add --source-root {shlex.quote(os.path.dirname(real))}")
        return None

    def whole_text(self, path: str | None) -> str | None:
        """The whole file when it may be read (``dynscope share`` learns which lines are the program's)."""
        resolved = resolve_path(path, self.cwd)
        if resolved is None or self.withheld(path) is not None or _real_path(resolved) is None:
            return None
        return _read_regular_file(resolved)

    def excerpt(self, path: str | None, line: int | None, *, context: int = 4) -> Excerpt | None:
        if self.withheld(path) is not None:
            return None
        return source_excerpt(path, line, self.cwd, context=context)


def source_excerpt(path: str | None, line: int | None, cwd: str | None = None, *, context: int = 4) -> Excerpt | None:
    """Lines ``line - context .. line + context`` of the file, or None if it can't be read.
    Views go through SourceAccess, which decides whether the file may be read at all."""
    resolved = resolve_path(path, cwd)
    if resolved is None or not line or line < 1 or _real_path(resolved) is None:
        return None
    text = _read_regular_file(resolved)
    if text is None:
        return None
    all_lines = text.splitlines()
    if line > len(all_lines):
        return None
    start, end = max(1, line - context), min(len(all_lines), line + context)
    return Excerpt(resolved, line, tuple((n, all_lines[n - 1]) for n in range(start, end + 1)))


def _read_regular_file(path: str) -> str | None:
    """The file's text, when it is a regular file of at most MAX_SOURCE_BYTES (store.regular: a FIFO
    or device, there or swapped in, is never read)."""
    try:
        data = read_regular(path, MAX_SOURCE_BYTES)
    except OSError:
        return None
    return data.decode("utf-8", "replace")


def _real_path(path: str) -> str | None:
    """``path`` with symlinks and ``..`` resolved, or None when it can name no file (a NUL, a
    lone surrogate that no file system encoding can write)."""
    try:
        return os.path.realpath(path)
    except (ValueError, UnicodeError):
        return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
