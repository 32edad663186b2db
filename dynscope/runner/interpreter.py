"""How every child dynscope starts is started: this python, its flags, and an import path that
holds no working directory.

A child works in a directory dynscope did not make: the directory an MCP server serves, a
tarball's, a fix run's scratch copy, a recorded run's. ``python -m`` would put that directory
first on ``sys.path``, and a ``json.py`` planted there would run in place of the standard
library's. So a child is ``python FLAGS -c PRELUDE MODULE ARGS``: the prelude takes python's own
entry for the working directory off ``sys.path`` (``-c`` puts ``''`` first), puts dynscope's own
install location first where the module python would find as ``dynscope`` is another one (a
source checkout run from its root), and runs the module as ``-m`` would. The environment the
child gets (``child_environment``) has every path in PYTHONPATH, PYTHONUSERBASE,
PYTHONPYCACHEPREFIX and PYTHONHOME made absolute against the parent's directory, as the parent
itself read them; an empty or relative PYTHONPATH entry would otherwise name the child's
directory, at startup too (a planted ``sitecustomize.py``). The user's own program, in the
recording child, gets its directory first on ``sys.path`` exactly as ``python SCRIPT`` would
(dynscope.runner.program), and the user's flags (``interpreter_flags``).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Mapping

# Variables whose value is one path (or a list of them) that python resolves against its working
# directory at startup.
_PATH_LISTS = ("PYTHONPATH",)
_PATHS = ("PYTHONUSERBASE", "PYTHONPYCACHEPREFIX", "PYTHONHOME")


def interpreter_flags() -> list[str]:
    """The flags this python runs with (-O, -X ..., -W ..., -u), so the program gets them too."""
    flags = list(getattr(subprocess, "_args_from_interpreter_flags", list)())
    if isinstance(getattr(sys.stdout, "buffer", None), io.FileIO):  # started with -u (torchrun does)
        flags.append("-u")
    return flags


def dynscope_root() -> str:
    """The directory dynscope is imported from (site-packages, or a source checkout's root)."""
    import dynscope

    return os.path.dirname(os.path.dirname(os.path.abspath(dynscope.__file__)))


def prelude(module: str) -> str:
    """The ``-c`` code of a child that runs ``module`` as ``python -m module`` would, minus the
    working directory on ``sys.path``."""
    import dynscope

    ours = os.path.abspath(dynscope.__file__)
    return ("import sys\n"
            "if sys.path[:1] == ['']: del sys.path[0]\n"  # -c's entry for the working directory
            "import importlib.util, os\n"
            "found = importlib.util.find_spec('dynscope')\n"
            f"if found is None or os.path.abspath(found.origin or '') != {ours!r}:\n"
            f"    sys.path.insert(0, {dynscope_root()!r})\n"
            "del found\n"
            f"import runpy; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")


def module_command(module: str, *, flags: bool = False) -> list[str]:
    """``python -m MODULE`` without any working directory on sys.path (see the module's doc).
    ``flags``: with this python's flags (a child that runs the user's program)."""
    return [sys.executable, *(interpreter_flags() if flags else []), "-c", prelude(module)]


def child_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (this process's environment) with the paths python resolves at startup made
    absolute against this process's directory: what they meant to this process, not to the
    directory a child starts in."""
    env = dict(os.environ if base is None else base)
    here = os.getcwd()
    for name in _PATH_LISTS:
        if name in env:
            entries = env[name].split(os.pathsep)
            env[name] = os.pathsep.join(os.path.normpath(os.path.join(here, p)) for p in entries if p or len(entries) > 1)
    for name in _PATHS:
        if env.get(name):
            env[name] = os.path.normpath(os.path.join(here, env[name]))
    return env


def without_directories(paths: list[str], directories: list[str]) -> list[str]:
    """``paths`` (a sys.path) without ``''``, relative entries and entries naming one of
    ``directories`` (working directories), but dynscope's own install location."""
    keep_anyway = os.path.realpath(dynscope_root())
    named = {os.path.realpath(d) for d in directories}
    return [p for p in paths
            if p and os.path.isabs(p) and (os.path.realpath(p) not in named or os.path.realpath(p) == keep_anyway)]
