"""What a graph break's line is, beyond its number: its statement, its function and its neighbours.

A break is known across edits by what it is, not where it is (dynscope.analysis.identity): its
function's qualified name (``Block.forward``: torch names only the code object, ``forward``, or
a resume function ``torch_dynamo_resume_in_forward_at_21``), the whole statement its line belongs
to (torch names one physical line of it: after ``ruff format`` splits a call, ``).nonzero()``)
and the statements around it. They are read here, while the program runs, from the same source
torch's own traceback reads (``linecache``), so a capture holds them after the file changed.

A statement is a simple statement, or the header of a compound one (``if y.mean() > 0:``, not its
body). Where a file cannot be parsed, the line itself and the nearest lines of code stand in.

Standard library only; nothing here is executed, only parsed (``ast``), once per file.
"""

from __future__ import annotations

import ast
import bisect
import linecache
import os
import sys
import sysconfig
from dataclasses import dataclass
from functools import cache

# How many statements on each side of a break identify it.
NEIGHBOURS = 2
# A file bigger than this is not parsed (a generated file of megabytes): its lines stand in.
_MAX_PARSE_LINES = 50_000


@dataclass(frozen=True)
class LineFacts:
    qualname: str | None  # the innermost function or class holding the line; None at module level
    statement: str | None  # the statement's lines (stripped, joined by newlines); None when unknown
    above: tuple[str, ...]  # the nearest statements above, nearest first
    below: tuple[str, ...]  # the nearest statements below, nearest first


@dataclass(frozen=True)
class _Index:
    scope_starts: list[int]
    scopes: list[tuple[int, int, str]]  # (first line, last line, qualified name), by first line
    unit_starts: list[int]
    units: list[tuple[int, int]]  # statements (compound ones: their header), by first line


_indexes: dict[str, _Index | None] = {}


def users_file(filename: str) -> bool:
    """Whether ``filename`` may be the user's code (a package's counts): not the standard
    library's or torch's (their breaks are placed at the user's line that called them, and
    parsing them costs time)."""
    if filename.startswith("<"):
        return False
    stdlib, torch = _library_dirs()
    if torch and filename.startswith(torch):
        return False
    packaged = any(f"{os.sep}{name}{os.sep}" in filename for name in ("site-packages", "dist-packages"))
    return packaged or not filename.startswith(stdlib)


@cache
def _library_dirs() -> tuple[tuple[str, ...], str | None]:
    """The standard library's folders, and torch's."""
    paths = sysconfig.get_paths()
    stdlib = tuple(os.path.join(paths[k], "") for k in ("stdlib", "platstdlib") if paths.get(k))
    module = sys.modules.get("torch")
    file = getattr(module, "__file__", None)
    return stdlib, os.path.join(os.path.dirname(file), "") if isinstance(file, str) else None


def line_facts(filename: str, line: int) -> LineFacts:
    lines = linecache.getlines(filename)
    if not lines or not 1 <= line <= len(lines):
        return LineFacts(None, None, (), ())
    if filename not in _indexes:
        _indexes[filename] = _read_index(filename, lines)
    index = _indexes[filename]
    if index is None:
        return LineFacts(None, None, _code_lines(lines, line - 2, -1), _code_lines(lines, line, 1))
    at = _innermost(index.unit_starts, index.units, line)
    if at is None:  # a line no statement holds (a blank line, a decorator's): the lines stand in
        statement, above, below = None, _code_lines(lines, line - 2, -1), _code_lines(lines, line, 1)
    else:
        statement = _text(lines, index.units[at])
        above = tuple(_text(lines, u) for u in index.units[max(0, at - NEIGHBOURS):at][::-1])
        below = tuple(_text(lines, u) for u in index.units[at + 1:at + 1 + NEIGHBOURS])
    scope = _innermost(index.scope_starts, index.scopes, line)
    return LineFacts(index.scopes[scope][2] if scope is not None else None, statement, above, below)


def _innermost(starts: list[int], spans: list[tuple[int, int]] | list[tuple[int, int, str]], line: int) -> int | None:
    """The span holding ``line`` that starts last (spans nest, so the innermost)."""
    for i in range(bisect.bisect_right(starts, line) - 1, -1, -1):
        if spans[i][0] <= line <= spans[i][1]:
            return i
    return None


def _text(lines: list[str], unit: tuple[int, int]) -> str:
    return "\n".join(lines[i].strip() for i in range(unit[0] - 1, unit[1]))


def _code_lines(lines: list[str], start: int, step: int) -> tuple[str, ...]:
    found: list[str] = []
    i = start
    while 0 <= i < len(lines) and len(found) < NEIGHBOURS:
        text = lines[i].strip()
        if text and not text.startswith("#"):
            found.append(text)
        i += step
    return tuple(found)


def _read_index(filename: str, lines: list[str]) -> _Index | None:
    if len(lines) > _MAX_PARSE_LINES:
        return None
    try:
        tree = ast.parse("".join(lines), filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    scopes: list[tuple[int, int, str]] = []
    units: list[tuple[int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                end = child.end_lineno or child.lineno
                body = [s for field in ("body", "orelse", "finalbody", "handlers", "cases")
                        for s in getattr(child, field, None) or () if isinstance(s, ast.AST)]
                if body:  # a compound statement: its header, up to its first clause's line
                    end = max(child.lineno, min(getattr(s, "lineno", end + 1) for s in body) - 1)
                units.append((child.lineno, end))
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                scopes.append((child.lineno, child.end_lineno or child.lineno, name))
                visit(child, name + ("." if isinstance(child, ast.ClassDef) else ".<locals>."))
            else:
                visit(child, prefix)

    visit(tree, "")
    scopes.sort()
    units.sort()
    return _Index([s[0] for s in scopes], scopes, [u[0] for u in units], units)
