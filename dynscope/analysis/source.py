"""The user's source around a line, read from their disk (paths as the program saw them).

A capture names the files; it must not decide what dynscope reads. A file is read only when
it is Python source (``.py``) inside the recorded program's tree (its working directory and
the script's directory) or inside this Python's own library directories; anything else is
withheld unless the user asks for it (``--any-source``). Paths are compared after resolving
symlinks and ``..``, so a capture can't climb out of the tree.
"""

from __future__ import annotations

import os
import sysconfig
from dataclasses import dataclass


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


@dataclass(frozen=True)
class SourceAccess:
    """Which files a view may read for a capture: its program's tree, this Python's libraries."""

    cwd: str | None
    roots: tuple[str, ...]
    any_source: bool = False

    @classmethod
    def for_run(cls, run, *, any_source: bool = False) -> SourceAccess:
        roots = [run.cwd] if run.cwd else []
        script = next((a for a in run.program_command if a.endswith(".py")), None)
        resolved = resolve_path(script, run.cwd)
        if resolved:
            roots.append(os.path.dirname(resolved))
        return cls(run.cwd, _real_roots(roots), any_source)

    def withheld(self, path: str | None) -> str | None:
        """Why ``path`` is not read, or None when it may be."""
        resolved = resolve_path(path, self.cwd)
        if resolved is None or self.any_source:
            return None
        real = os.path.realpath(resolved)
        if not real.endswith(".py"):
            return f"{path} is not Python source: not read (--any-source reads it)"
        if not any(_inside(real, root) for root in (*self.roots, *_library_roots())):
            return f"{path} is outside the program's directory: not read (--any-source reads it)"
        return None

    def excerpt(self, path: str | None, line: int | None, *, context: int = 4) -> Excerpt | None:
        if self.withheld(path) is not None:
            return None
        return source_excerpt(path, line, self.cwd, context=context)


def source_excerpt(path: str | None, line: int | None, cwd: str | None = None, *, context: int = 4) -> Excerpt | None:
    """Lines ``line - context .. line + context`` of the file, or None if it can't be read.
    Views go through SourceAccess, which decides whether the file may be read at all."""
    resolved = resolve_path(path, cwd)
    if resolved is None or not line or not os.path.isfile(resolved):
        return None
    try:
        with open(resolved, encoding="utf-8", errors="replace") as f:
            all_lines = f.read().splitlines()
    except OSError:
        return None
    if line > len(all_lines):
        return None
    start, end = max(1, line - context), min(len(all_lines), line + context)
    return Excerpt(resolved, line, tuple((n, all_lines[n - 1]) for n in range(start, end + 1)))


def _real_roots(paths: list[str]) -> tuple[str, ...]:
    # The filesystem root would admit every file: a capture claiming it gets no tree at all.
    real = (os.path.realpath(p) for p in paths if os.path.isabs(p))
    return tuple(dict.fromkeys(r for r in real if os.path.dirname(r) != r))


def _library_roots() -> tuple[str, ...]:
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    return _real_roots([p for p in (sysconfig.get_paths().get(n) for n in names) if p])


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
