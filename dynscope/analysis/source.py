"""The user's source around a line, read from their disk (paths as the program saw them)."""

from __future__ import annotations

import os
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


def source_excerpt(path: str | None, line: int | None, cwd: str | None = None, *, context: int = 4) -> Excerpt | None:
    """Lines ``line - context .. line + context`` of the file, or None if it can't be read."""
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

