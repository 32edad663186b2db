"""What a graph break's line is, beyond its number: the function it is in and its neighbours.

A break is known across edits by what it is, not where it is (dynscope.analysis.identity): its
function's qualified name (``Block.forward``: torch names only the code object, ``forward``, or
a resume function ``torch_dynamo_resume_in_forward_at_21``) and the text of the nearest lines
of code around it. Both are read here, while the program runs, from the same source torch's
own traceback reads (``linecache``), so a capture holds them even after the file changed.

Standard library only; nothing here is executed, only parsed (``ast``), once per file.
"""

from __future__ import annotations

import ast
import bisect
import linecache
import os
import sys
import sysconfig
from functools import cache

# How many lines of code on each side of a break identify it (blank and comment lines skipped).
NEIGHBOURS = 2
# A file bigger than this is not parsed for qualified names (a generated file of megabytes).
_MAX_PARSE_LINES = 50_000

_scopes: dict[str, tuple[list[int], list[tuple[int, int, str]]] | None] = {}


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


def neighbours(filename: str, line: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The nearest ``NEIGHBOURS`` lines of code above and below ``line`` (stripped, nearest first)."""
    lines = linecache.getlines(filename)
    if not lines or not 1 <= line <= len(lines):
        return (), ()
    return _code_lines(lines, line - 2, -1), _code_lines(lines, line, 1)


def _code_lines(lines: list[str], start: int, step: int) -> tuple[str, ...]:
    found: list[str] = []
    i = start
    while 0 <= i < len(lines) and len(found) < NEIGHBOURS:
        text = lines[i].strip()
        if text and not text.startswith("#"):
            found.append(text)
        i += step
    return tuple(found)


def qualified_name(filename: str, line: int) -> str | None:
    """The qualified name of the innermost function or class whose body holds ``line``
    (``Block.forward``, ``outer.<locals>.inner``); None at module level or when unknown."""
    scopes = _scopes.get(filename, ...)
    if scopes is ...:
        scopes = _scopes[filename] = _read_scopes(filename)
    if scopes is None:
        return None
    starts, spans = scopes
    # Scopes nest, so the containing one that starts last is the innermost.
    for i in range(bisect.bisect_right(starts, line) - 1, -1, -1):
        start, end, name = spans[i]
        if start <= line <= end:
            return name
    return None


def _read_scopes(filename: str) -> tuple[list[int], list[tuple[int, int, str]]] | None:
    lines = linecache.getlines(filename)
    if not lines or len(lines) > _MAX_PARSE_LINES:
        return None
    try:
        tree = ast.parse("".join(lines), filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    spans: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                spans.append((child.lineno, child.end_lineno or child.lineno, name))
                inner = name + "." if isinstance(child, ast.ClassDef) else name + ".<locals>."
                visit(child, inner)
            else:
                visit(child, prefix)

    visit(tree, "")
    spans.sort()
    return [s[0] for s in spans], spans
