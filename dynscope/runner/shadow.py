"""Run changed source without changing a file: the shadow a trial child imports through.

``dynscope fix`` tries source changes (a patch given with ``--patch``, a rewrite from the
remedy table) in a trial child only. The parent hands the child the changed text of each
file; ``install`` puts a finder first on ``sys.meta_path`` that serves those files' modules
from the text instead of the disk, for the program's own files and installed libraries
alike. The script run as ``__main__`` reads through ``script_source``. Nothing is written:
no file, no ``__pycache__`` (the changed code is compiled in memory), and ``linecache``
holds the changed lines, so tracebacks and Dynamo's graph-break records quote the code that
ran.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import linecache
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from types import CodeType, ModuleType, TracebackType

# realpath of a changed file -> its changed text (one shadow per process: a child runs one trial)
_SOURCES: dict[str, str] = {}


def install(sources: Mapping[str, str]) -> None:
    """Serve each file of ``sources`` (absolute path -> changed text) from its text from now on.

    Call it before the program imports anything of its own. Modules already imported keep the
    code they were loaded with: the trial child installs the shadow before the program starts."""
    for path, text in sources.items():
        real = os.path.realpath(path)
        _SOURCES[real] = text
        lines = text.splitlines(keepends=True)
        for name in {path, real}:
            # mtime None: linecache.checkcache never replaces the entry with the disk's lines
            linecache.cache[name] = (len(text), None, lines, name)
    if not any(isinstance(finder, _ShadowFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _ShadowFinder())
    if sys.excepthook is sys.__excepthook__:
        # Python's built-in hook reads the lines it quotes from the disk; the traceback module
        # reads them through linecache, where the changed lines are.
        sys.excepthook = _print_exception


def _print_exception(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    traceback.print_exception(kind, value, tb)


def script_source(path: str) -> bytes:
    """The bytes to run for the script ``path``: its shadow's when it has one, else the file's."""
    text = _SOURCES.get(os.path.realpath(path))
    if text is not None:
        return text.encode("utf-8")
    with open(path, "rb") as f:
        return f.read()


def shadowed(path: str) -> bool:
    return os.path.realpath(path) in _SOURCES


class _ShadowFinder(importlib.abc.MetaPathFinder):
    """Finds modules where the normal path finder would, and loads the shadowed ones from text."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None  # not a source file: the other finders answer as they always do
        text = _SOURCES.get(os.path.realpath(spec.origin))
        if text is None:
            return None
        spec.loader = _ShadowLoader(fullname, spec.origin, text)
        return spec


class _ShadowLoader(importlib.machinery.SourceFileLoader):
    """A source loader whose source is the shadow's text and whose code is never cached on disk."""

    def __init__(self, fullname: str, path: str, text: str) -> None:
        super().__init__(fullname, path)
        self._text = text

    def get_source(self, fullname: str) -> str:
        return self._text

    def get_code(self, fullname: str) -> CodeType:
        return compile(self._text, self.path, "exec", dont_inherit=True)
