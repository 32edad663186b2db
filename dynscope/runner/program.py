"""Run a user's script or module in this process exactly as ``python`` would."""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.util
import os
import runpy
import signal
import sys
import types
from dataclasses import dataclass, field

from dynscope.errors import DynscopeError
from dynscope.runner import shadow


@dataclass(frozen=True)
class Program:
    """``python SCRIPT ARGS`` (kind "script") or ``python -m MODULE ARGS`` (kind "module")."""

    kind: str
    target: str
    args: list[str] = field(default_factory=list)

    @property
    def display(self) -> str:
        return f"-m {self.target}" if self.kind == "module" else self.target


def check_runnable(program: Program) -> None:
    """Refuse what python itself would refuse, with one clear line instead of a traceback."""
    if program.kind == "module":
        return  # resolved in the child, where the user's sys.path applies
    path = program.target
    if not os.path.exists(path):
        raise DynscopeError(f"cannot run {path}: no such file", exit_code=2)
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "__main__.py")):
        raise DynscopeError(f"cannot run {path}: it is a directory with no __main__.py", exit_code=2)
    source_path = os.path.join(path, "__main__.py") if os.path.isdir(path) else path
    try:
        with open(source_path, "rb") as f:
            source = f.read()
    except OSError as e:
        raise DynscopeError(f"cannot run {path}: {e.strerror}", exit_code=2) from None
    try:
        compile(source, source_path, "exec", dont_inherit=True)
    except SyntaxError as e:
        raise DynscopeError(
            f"cannot run {path}: syntax error at line {e.lineno}: {e.msg}", exit_code=1
        ) from None
    except ValueError as e:  # e.g. source with NUL bytes
        raise DynscopeError(f"cannot run {path}: {e}", exit_code=1) from None


def run_program(program: Program, *, workdir: str | None = None) -> None:
    """Run it as __main__. Exceptions other than SystemExit are reported like python does
    (traceback on stderr, exit status 1) with dynscope's own frames left out.

    ``workdir`` (dynscope fix: a scratch copy of this directory) is where the program runs; its
    script and module search path are still resolved here first, so its code is the original's."""
    sys.argv = [program.target, *program.args]
    try:
        # What python puts first (the child started with no working directory on sys.path:
        # dynscope.runner.interpreter): the script's directory, or for -m the current one.
        sys.path.insert(0, os.getcwd() if program.kind == "module" else os.path.dirname(os.path.realpath(program.target)))
        target = program.target if program.kind == "module" else os.path.abspath(program.target)
        if workdir is not None:
            os.chdir(workdir)
        if program.kind == "module":
            if importlib.util.find_spec(target) is None:
                raise DynscopeError(f"no module named {target}", exit_code=1)
            runpy.run_module(target, init_globals={"__builtins__": builtins}, run_name="__main__",
                             alter_sys=True)
        else:
            if os.path.isfile(target):
                _run_script(target)
            else:  # a directory or zip file with __main__.py
                runpy.run_path(target if workdir is not None else program.target, run_name="__main__")
    except (SystemExit, DynscopeError):
        raise
    except BaseException as exc:
        raise UserProgramError(exc, _user_traceback(exc.__traceback__)) from None


def _run_script(path: str) -> None:
    """What python does with ``python SCRIPT``: a fresh ``__main__`` module whose ``__file__``
    and code filename are the script's absolute path (python >= 3.9; sys.argv[0] stays as
    typed), ``__builtins__`` the builtins module, ``__loader__`` a SourceFileLoader,
    ``__spec__`` and ``__package__`` None. (runpy.run_path would set sys.argv[0] to the
    path it was given and ``__builtins__`` to a dict.)"""
    source = shadow.script_source(path)  # a fix trial may run changed source (dynscope.runner.shadow)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=builtins,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", path))
    sys.modules["__main__"] = main
    code = compile(source, path, "exec", dont_inherit=True)
    exec(code, main.__dict__)


class UserProgramError(Exception):
    """The user's program raised; carries its exception with the user-visible traceback."""

    def __init__(self, exc: BaseException, tb: types.TracebackType | None) -> None:
        super().__init__(str(exc))
        self.exc = exc
        self.tb = tb

    def report_and_exit(self) -> None:
        """What python does with an uncaught exception: excepthook, then status 1
        (or death by SIGINT for KeyboardInterrupt, as python >= 3.8 does)."""
        # Python prints value.__traceback__ (not the tb argument) for chained display.
        self.exc.with_traceback(self.tb)
        sys.excepthook(type(self.exc), self.exc, self.tb)
        sys.stderr.flush()
        if isinstance(self.exc, KeyboardInterrupt):
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        sys.exit(1)


def _user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """Drop the leading frames that belong to dynscope and runpy."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runpy_file = os.path.abspath(runpy.__file__)
    while tb is not None:
        raw = tb.tb_frame.f_code.co_filename
        ours = raw.startswith("<frozen runpy") or (
            not raw.startswith("<") and (os.path.abspath(raw).startswith(here + os.sep) or os.path.abspath(raw) == runpy_file)
        )
        if not ours:
            break
        tb = tb.tb_next
    return tb
