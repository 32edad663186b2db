"""Where one ``dynscope fix`` writes: a directory no other fix run uses at the same time.

Trials clear their capture's name before they start, so two runs sharing a directory would
delete each other's captures. The default directory is new for every run
(``<program>-fix-<date>-<time>``, then ``-2``, ``-3``... when that name is taken: ``mkdir`` is the
test, so two runs started in the same second still get two directories). ``--out DIR`` may name a
directory used before; it is locked (``DIR/.dynscope-fix.lock``, an advisory lock held for the
whole run) so a second run given the same DIR is refused at once instead of running beside it.
The lock file also marks the directory as fix output: the scratch copies of the program's
working directory (dynscope/fix/scratch.py) leave it out.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass

from dynscope.errors import DynscopeError

LOCK_NAME = ".dynscope-fix.lock"
_MAX_SUFFIX = 100  # default names tried in one second before giving up


@dataclass
class OutDir:
    path: str  # absolute
    _fd: int | None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = None


def claim(requested: str | None, stem: str) -> OutDir:
    """The run's output directory, made (the default) or checked (``--out``), and locked."""
    path = _new_default(stem) if requested is None else _existing_or_new(requested)
    return OutDir(path, _lock(path, requested or path))


def _new_default(stem: str) -> str:
    base = os.path.abspath(f"{stem}-fix-{time.strftime('%Y%m%d-%H%M%S')}")
    for n in range(1, _MAX_SUFFIX + 1):
        path = base if n == 1 else f"{base}-{n}"
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
        except OSError as e:
            raise DynscopeError(f"cannot create the output directory {path}: {e.strerror}") from None
    raise DynscopeError(f"cannot create an output directory beside {base}: {_MAX_SUFFIX} names are taken; "
                        "choose one with --out DIR")


def _existing_or_new(requested: str) -> str:
    path = os.path.abspath(requested)
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        raise DynscopeError(f"--out {requested}: it exists and is not a directory") from None
    except OSError as e:
        raise DynscopeError(f"cannot use --out {requested}: {e.strerror}") from None
    return path


def _lock(path: str, shown: str) -> int | None:
    try:
        import fcntl
    except ImportError:  # no advisory locks (Windows): the default directory is still new per run
        return None
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(os.path.join(path, LOCK_NAME), flags, 0o644)
    except OSError as e:
        raise DynscopeError(f"cannot use --out {shown}: {os.path.join(shown, LOCK_NAME)}: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DynscopeError(f"cannot use --out {shown}: {LOCK_NAME} there is not a regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise DynscopeError(f"another dynscope fix is writing into {shown}: wait for it to end "
                                "or choose another --out") from None
    except BaseException:
        os.close(fd)
        raise
    return fd
