"""``<capture>.lock``: one writer per capture (``explain``, ``import -o``, ``fix``'s runs).

The lock sits beside the capture, in a directory that may be shared or unpacked from a
stranger's tarball, so its name may already be taken by a symlink, a hard link to some
other file, a FIFO or a file of another user. It is created with ``O_EXCL | O_NOFOLLOW``;
a file found there is reused only if it is one dynscope left behind (a regular file of
ours, with one link, holding nothing but a pid), and anything else is refused with one
line. So taking the lock never follows a link and never truncates a file dynscope did
not write.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from dynscope.errors import DynscopeError

LOCK_SUFFIX = ".lock"
# What dynscope writes into a lock: its pid, a few digits. Anything bigger is not ours.
_MAX_LOCK_BYTES = 32
_TRIES = 5  # a run that ends removes its lock; racing it, we look again a few times


@contextmanager
def exclusive_writer(capture_path: str) -> Iterator[None]:
    """Hold ``<capture>.lock`` while writing the capture: a second run writing the same
    capture is refused at once instead of deleting the first one's file under it."""
    try:
        import fcntl
    except ImportError:  # no advisory locks here (Windows): nothing to hold
        yield
        return
    lock_path = capture_path + LOCK_SUFFIX
    fd, identity = _take(lock_path, capture_path, fcntl)
    try:
        yield
    finally:
        try:
            # Remove it only while the name is still our file (never what replaced it).
            if _identity(os.stat(lock_path, follow_symlinks=False)) == identity:
                os.remove(lock_path)
        except OSError:
            pass
        os.close(fd)


def _take(lock_path: str, capture_path: str, fcntl: ModuleType) -> tuple[int, tuple[int, int]]:
    for _ in range(_TRIES):
        fd, created = _open(lock_path, capture_path)
        try:
            st = os.fstat(fd)
            if not created:
                _check_ours(fd, st, lock_path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                owner = os.pread(fd, _MAX_LOCK_BYTES, 0).decode("ascii", "replace").strip() or "?"
                raise DynscopeError(f"another dynscope run (pid {owner}) is writing {capture_path}: "
                                    "wait for it to end or choose another -o") from None
            # The run that held it may have ended and removed it between our open and our
            # lock: then we hold a file no one else can see. Look again.
            try:
                now = os.stat(lock_path, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            if now is None or _identity(now) != _identity(st):
                os.close(fd)
                continue
            # Ours (just created, or a pid file a killed run left): replace the pid.
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            return fd, _identity(st)
        except BaseException:
            try:
                os.close(fd)
            except OSError:
                pass
            raise
    raise DynscopeError(f"cannot take the lock {lock_path}: other runs keep replacing it")


def _open(lock_path: str, capture_path: str) -> tuple[int, bool]:
    """(fd, created). Never follows a symlink; never blocks on a FIFO."""
    flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        try:
            return os.open(lock_path, flags | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            pass
        except OSError as e:
            raise DynscopeError(f"cannot write capture {capture_path}: {e.strerror}") from None
        try:
            st = os.stat(lock_path, follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed meanwhile: create it
        except OSError as e:
            raise DynscopeError(f"cannot write capture {capture_path}: {e.strerror}") from None
        _refuse_unless_plain(st, lock_path)
        try:
            return os.open(lock_path, flags | os.O_NONBLOCK), False
        except FileNotFoundError:
            continue
        except OSError as e:
            raise DynscopeError(f"cannot use the lock {lock_path}: {e.strerror}; remove it") from None


def _refuse_unless_plain(st: os.stat_result, lock_path: str) -> None:
    if stat.S_ISLNK(st.st_mode):
        why = "it is a symbolic link"
    elif not stat.S_ISREG(st.st_mode):
        why = f"it is {file_kind(st.st_mode)}, not a file dynscope wrote"
    elif st.st_nlink != 1:
        why = "it has other names (a hard link), so it is not a file dynscope wrote"
    elif hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        why = "another user owns it"
    elif st.st_size > _MAX_LOCK_BYTES:
        why = "it holds more than a pid, so it is not a file dynscope wrote"
    else:
        return
    raise DynscopeError(f"refusing to use the lock {lock_path}: {why}; remove it if no dynscope run is writing "
                        "this capture")


def _check_ours(fd: int, st: os.stat_result, lock_path: str) -> None:
    """The file we opened (checked again on the open file: the name may have changed)."""
    _refuse_unless_plain(st, lock_path)
    content = os.pread(fd, _MAX_LOCK_BYTES + 1, 0)
    if content.strip() and not content.strip().isdigit():
        raise DynscopeError(f"refusing to use the lock {lock_path}: it holds something other than a pid, "
                            "so it is not a file dynscope wrote; remove it if no dynscope run is writing "
                            "this capture")


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def file_kind(mode: int) -> str:
    """"a FIFO", "a character device"... for messages about special files."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"
