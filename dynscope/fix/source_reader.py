"""Which files ``dynscope fix``'s source rewrites may read, and how they are named in a diff.

A break is fixed where it is: in the program's own files (under its tree: the script's
directory, or the working directory of ``-m``) and in installed libraries (a break inside
``transformers`` is rewritten in ``transformers``; running fix is the user's consent to try
that in a shadow, never on disk). Nothing else is read: not torch or dynscope themselves, not
a file outside both places, not a file over 16 MiB, not a regular file, or one that is not
UTF-8 text; the rewrites made of what it reads are bounded again (dynscope/rewrites/bounded.py:
1 MiB, nesting, time, memory, --budget). With ``--from`` the program's tree is the directory the
capture names, read only after the user agreed to run there (the session makes the reader after
that question: dynscope/commands/fix.py).
"""

from __future__ import annotations

import functools
import os
import site
import sys
import sysconfig
from collections.abc import Iterable
from importlib import metadata

from dynscope.analysis.remedies import SourceReader
from dynscope.analysis.source_edits import SourceFile
from dynscope.rewrites.bounded import RewriteBudget
from dynscope.store.regular import read_regular

MAX_SOURCE_BYTES = 16 * 1024 * 1024
_NEVER = frozenset({"torch", "dynscope", "functorch", "torchgen"})  # the compiler and the judge are not the program


def library_dirs() -> list[str]:
    """Where installed packages live (site-packages of this interpreter, the user's too)."""
    found: list[str] = []
    paths = [sysconfig.get_paths().get(k) for k in ("purelib", "platlib")]
    try:
        paths += site.getsitepackages()
    except AttributeError:  # some virtualenvs' site module lacks it
        pass
    paths.append(site.getusersitepackages() if site.ENABLE_USER_SITE else None)
    # A site-packages another environment lends through a .pth file (a venv layered on a shared one) holds
    # installed packages too: on sys.path, named as every installer names them.
    paths += [p for p in sys.path if os.path.basename(os.path.normpath(p)) in ("site-packages", "dist-packages")]
    for path in paths:
        if path and os.path.isdir(path):
            real = os.path.realpath(path)
            if real not in found:
                found.append(real)
    return found


def reader_for(root: str, libraries: Iterable[str] | None = None, budget: RewriteBudget | None = None) -> SourceReader:
    """A reader of the Python files under ``root`` (the program's tree) and in ``libraries``
    (default: this interpreter's site-packages), each read once. ``budget`` bounds the rewrites
    made of what it reads (dynscope/rewrites/bounded.py: fix's --budget and where to say a decline)."""
    real_root = os.path.realpath(root)
    libs = [os.path.realpath(d) for d in (library_dirs() if libraries is None else libraries)]
    cache: dict[str, SourceFile | None] = {}

    def read(path: str) -> SourceFile | None:
        real = os.path.realpath(path)
        if real not in cache:
            cache[real] = _read(real, real_root, libs, budget)
        return cache[real]
    return read


def _inside(path: str, directory: str) -> bool:
    return directory != os.path.dirname(directory) and os.path.commonpath([path, directory]) == directory


def _read(real: str, root: str, libraries: list[str], budget: RewriteBudget | None = None) -> SourceFile | None:
    if not real.endswith(".py") or not os.path.isfile(real):
        return None
    library = next((d for d in libraries if _inside(real, d)), None)
    # A virtualenv inside the program's tree: its packages are libraries, not the program's files.
    if library is not None:
        shown = os.path.relpath(real, library).replace(os.sep, "/")
        top = shown.split("/", 1)[0]
        if top in _NEVER or "/" not in shown and top.endswith(".py") and top[:-3] in _NEVER:
            return None
        package, version = _distribution(top.removesuffix(".py"))
    elif _inside(real, root):
        shown, package, version = os.path.relpath(real, root).replace(os.sep, "/"), None, None
    else:
        return None
    try:  # a FIFO swapped in after the check above is refused before it is read
        text = read_regular(real, MAX_SOURCE_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return SourceFile(real, text, shown, package, version, budget)


@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    try:
        return dict(metadata.packages_distributions())
    except Exception:  # a broken distribution's metadata must not stop fix
        return {}


def _distribution(top: str) -> tuple[str, str | None]:
    """(distribution name, version) of an importable top-level name; the name itself when unknown."""
    names = _distributions().get(top) or []
    for name in names:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return top, None
