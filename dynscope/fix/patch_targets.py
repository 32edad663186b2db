"""Which files a judged patch (``fix --patch``, MCP ``judge_patch``) may change.

A patch is judged by serving its files' changed text to the trial run's imports (dynscope.runner.shadow):
only Python source that the program imports after the trial starts. Three kinds of target can never be
judged that way, and a patch that names one is refused in one line (exit 2) rather than judged as if
it had run:

- torch's own code (torch, functorch, torchgen) and dynscope's: both are imported before the
  program starts, so the trial would run the code on disk and call the patch's verdict its own;
  and changing the compiler or the judge is not a change to the program;
- a ``.pth`` file, ``sitecustomize.py`` or ``usercustomize.py``: Python runs them at start-up (the
  ``import`` lines of a ``.pth`` file are code), before any shadow exists;
- any other file of an installed package that is not ``.py`` source (``.so``, metadata, data).

The program's own files and the ``.py`` files of other installed libraries (``transformers/…``, as
``fix --diff`` names them) are judged as before.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Sequence

from dynscope.errors import DynscopeError

# The compiler and the judge: imported before any patch can take effect.
PROTECTED_PACKAGES = ("torch", "functorch", "torchgen", "dynscope")
# Files Python runs at start-up, wherever they are on the path.
STARTUP_FILES = frozenset({"sitecustomize.py", "usercustomize.py"})
EXIT_CODE = 2


class PatchTargetError(DynscopeError):
    """A patch that names a file dynscope does not judge changes to."""


def check_targets(paths: Iterable[tuple[str, str]], name: str, libraries: Sequence[str]) -> None:
    """Refuse, in one line, a patch whose files (``(absolute path, path as the patch names it)``)
    include one a trial cannot judge; nothing has run yet."""
    protected = _protected_dirs()
    libs = [os.path.realpath(d) for d in libraries]
    for path, shown in paths:
        why = refusal(os.path.realpath(path), protected, libs)
        if why is not None:
            raise PatchTargetError(f"{name}: refusing to judge a change to {shown}: {why}; nothing was run",
                                   exit_code=EXIT_CODE)


def refusal(real: str, protected: Sequence[tuple[str, str]], libraries: Sequence[str]) -> str | None:
    """Why a patch may not change the file ``real`` (a real path), or None when it may; ``protected``:
    (package, its directory) of the packages a patch may not change, wherever they are installed."""
    base = os.path.basename(real)
    for package, directory in protected:
        if _inside(real, directory):
            return (f"it is {package}'s own code, imported before the patch could take effect (a trial would run "
                    "the file on disk)")
    if base.endswith(".pth"):
        return "a .pth file is run by Python at start-up, before a trial's changes exist"
    if base in STARTUP_FILES:
        return f"{base} is run by Python at start-up, before a trial's changes exist"
    library = next((d for d in libraries if _inside(real, d)), None) or _site_packages_of(real)
    if library is not None:
        top = os.path.relpath(real, library).split(os.sep, 1)[0]
        if top in PROTECTED_PACKAGES or top.removesuffix(".py") in PROTECTED_PACKAGES:
            return f"it is {top.removesuffix('.py')}'s own code, imported before the patch could take effect"
        if not base.endswith(".py"):
            return "only the .py source of an installed package is served to a trial (not data, metadata or binaries)"
    return None


def _site_packages_of(real: str) -> str | None:
    """The site-packages directory ``real`` is in, for one this interpreter does not use (another
    virtualenv inside the program's tree): its torch is torch all the same."""
    parts = real.split(os.sep)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] in ("site-packages", "dist-packages"):
            return os.sep.join(parts[:i + 1])
    return None


def _protected_dirs() -> list[tuple[str, str]]:
    """Where torch, functorch, torchgen and dynscope are installed (found, not imported): an editable
    install or a source checkout inside the program's tree counts as much as site-packages."""
    found: list[tuple[str, str]] = []
    for package in PROTECTED_PACKAGES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec is not None else []:
            found.append((package, os.path.realpath(location)))
    return found


def _inside(path: str, directory: str) -> bool:
    return directory != os.path.dirname(directory) and os.path.commonpath([path, directory]) == directory
