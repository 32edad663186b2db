"""The directory an MCP server serves: every file a client names is opened once, inside it.

A client (an agent, or whoever feeds it text) names captures, scripts and output files; a
capture from a stranger names paths too (a warm run's cold capture). Nothing outside the served
directory is read, run or written through the server. A path is walked one component at a time
from the root's descriptor (``openat`` with ``O_NOFOLLOW``): a symbolic link is never followed
by the kernel; one that points inside the root is followed by the walk itself, component by
component again, and one that leads out is refused. What is read is read from the descriptor
the walk opened, so a link swapped in after the check is never followed (there is no second
open by name: SQLite's own open of a capture is checked to be the same file, see
dynscope.store.reader). Every refusal is one line that says why.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dynscope.errors import DynscopeError

if TYPE_CHECKING:
    from dynscope.model import Capture

# What list_captures reads: a huge tree must not stall the server.
MAX_LISTED_ENTRIES = 20_000
MAX_LISTED_CAPTURES = 500
MAX_LISTED_DEPTH = 64  # directories deeper than this are skipped, and the answer says so
MAX_LINKS = 40  # links followed in one path (the kernel's own limit)
MAX_PATH_CHARS = 4096

_NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class OutsideServedDirectory(DynscopeError):
    pass


@dataclass(frozen=True)
class Opened:
    """A file the walk opened: its descriptor (the caller's to close) and where it is."""

    fd: int
    relative: str  # from the root, with no link in it
    path: str  # root + relative


@dataclass(frozen=True)
class ServedDirectory:
    root: str  # absolute and resolved
    root_fd: int = field(default=-1, compare=False, repr=False)  # held for the server's life

    @classmethod
    def at(cls, path: str) -> ServedDirectory:
        if not os.path.isdir(path):
            raise DynscopeError(f"--root {path}: not a directory")
        real = os.path.realpath(path)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
        except OSError as e:
            raise DynscopeError(f"--root {path}: cannot open it ({e.strerror})") from None
        return cls(real, fd)

    # -- the one door --------------------------------------------------------------------------

    def open(self, path: str, *, what: str = "path", regular: bool = True) -> Opened:
        """``path`` (relative to the root, or absolute under it) opened by walking from the root's
        descriptor; a regular file (``regular``) or a directory. The caller closes ``fd``."""
        names = self._names(path, what)
        done: list[str] = []  # directories walked so far, below the root (none of them a link)
        dir_fd = os.dup(self.root_fd)
        links = 0
        try:
            while names:
                name = names.pop(0)
                if name == "..":
                    if not done:
                        raise self._outside(path, what)
                    done.pop()
                    os.close(dir_fd)
                    dir_fd = self._walk(done)  # again from the root: ".." of a directory we walked
                    continue
                last = not names
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except OSError as e:
                    raise self._missing(path, what, e) from None
                if stat.S_ISLNK(st.st_mode):
                    links += 1
                    if links > MAX_LINKS:
                        raise DynscopeError(f"{what} {path!r}: more than {MAX_LINKS} symbolic links; not followed")
                    try:
                        target = os.readlink(name, dir_fd=dir_fd)
                    except OSError as e:  # EINVAL: no longer a link (swapped since the lstat)
                        raise self._changed_or_missing(path, what, e) from None
                    if os.path.isabs(target):
                        inside = self._under_root(target)
                        if inside is None:
                            raise self._outside(path, what, link=True)
                        done = []
                        os.close(dir_fd)
                        dir_fd = os.dup(self.root_fd)
                        names = [*inside, *names]
                    else:
                        names = [*_split(target), *names]
                    continue
                if not last and not stat.S_ISDIR(st.st_mode):
                    raise DynscopeError(f"no such {what}: {path} ({'/'.join([*done, name])} is not a directory)")
                if last:
                    fd = self._open_last(name, dir_fd, st, path, what, regular)
                    return Opened(fd, os.path.join(*done, name), os.path.join(self.root, *done, name))
                child = self._open_dir(name, dir_fd, path, what)
                os.close(dir_fd)
                dir_fd = child
                done.append(name)
            if regular:
                raise DynscopeError(f"no such {what}: {path} (it is the served directory itself)")
            return Opened(os.dup(dir_fd), os.path.join(*done) if done else ".", os.path.join(self.root, *done))
        finally:
            os.close(dir_fd)

    @contextmanager
    def opened(self, path: str, *, what: str) -> Iterator[Opened]:
        found = self.open(path, what=what)
        try:
            yield found
        finally:
            os.close(found.fd)

    def _names(self, path: object, what: str) -> list[str]:
        if not isinstance(path, str) or not path or "\0" in path:
            raise OutsideServedDirectory(f"{what} must be a non-empty path without NUL characters")
        if len(path) > MAX_PATH_CHARS:
            raise OutsideServedDirectory(f"{what} is longer than {MAX_PATH_CHARS} characters")
        if os.path.isabs(path):
            inside = self._under_root(path)
            if inside is None:
                raise self._outside(path, what)
            return inside
        return _split(path)

    def _under_root(self, absolute: str) -> list[str] | None:
        """The components of an absolute path below the root (None: not under it, as written)."""
        parts = _split(absolute)
        root = _split(self.root)
        return parts[len(root):] if parts[: len(root)] == root else None

    def _walk(self, names: list[str]) -> int:
        fd = os.dup(self.root_fd)
        for name in names:
            child = self._open_dir(name, fd, "/".join(names), "directory")
            os.close(fd)
            fd = child
        return fd

    def _open_dir(self, name: str, dir_fd: int, path: str, what: str) -> int:
        try:
            return os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=dir_fd)
        except OSError as e:
            raise self._changed_or_missing(path, what, e) from None

    def _open_last(self, name: str, dir_fd: int, st: os.stat_result, path: str, what: str, regular: bool) -> int:
        wanted = stat.S_ISREG if regular else stat.S_ISDIR
        if not wanted(st.st_mode):
            kind = _kind(st.st_mode)
            raise DynscopeError(f"{what} {path!r} is {kind}, not {'a regular file' if regular else 'a directory'}; "
                                "not opened")
        flags = os.O_RDONLY | _NOFOLLOW | (os.O_NONBLOCK if regular else os.O_DIRECTORY)
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except OSError as e:
            raise self._changed_or_missing(path, what, e) from None
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not wanted(now.st_mode):
            os.close(fd)
            raise DynscopeError(f"{what} {path!r} changed while it was opened (another file took its name); not read")
        if regular:
            os.set_blocking(fd, True)
        return fd

    def _outside(self, path: str, what: str, *, link: bool = False) -> OutsideServedDirectory:
        how = "leads through a symbolic link to" if link else "is"
        return OutsideServedDirectory(f"{what} {path!r} {how} outside the directory this server serves ({self.root}); "
                                      "give a path inside it")

    def _missing(self, path: str, what: str, e: OSError) -> DynscopeError:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return DynscopeError(f"no such {what}: {path}")
        return DynscopeError(f"cannot open {what} {path!r}: {e.strerror}")

    def _changed_or_missing(self, path: str, what: str, e: OSError) -> DynscopeError:
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EINVAL):  # a link where there was none a moment ago, or gone
            return DynscopeError(f"{what} {path!r} changed while it was opened (a symbolic link came or went); "
                                 "not followed")
        return self._missing(path, what, e)

    # -- what the tools ask ------------------------------------------------------------------

    def resolve(self, path: str, *, what: str = "path") -> str:
        """``path`` as the path of the file inside the root it names (checked: opened and closed)."""
        found = self.open(path, what=what)
        os.close(found.fd)
        return found.path

    def existing_file(self, path: str, *, what: str) -> str:
        return self.resolve(path, what=what)

    def capture(self, path: str) -> str:
        """A capture file inside the root, told by its SQLite header (not by its name)."""
        with self.opened(path, what="capture") as found:
            _check_capture(found, path)
            return found.path

    def open_capture(self, path: str) -> Capture:
        """The capture ``path`` names, read from the descriptor the walk opened; a warm capture's
        cold run beside it comes through this door too."""
        from dynscope.model import Capture

        with self.opened(path, what="capture") as found:
            _check_capture(found, path)
            directory = os.path.dirname(found.relative)
            return Capture.open(found.path, pinned=found.fd,
                                beside=lambda name: self.open_capture(os.path.join(directory, name)))

    def copy_capture(self, path: str, destination: str) -> None:
        """The capture ``path`` names, copied from its descriptor to ``destination`` (a new file
        in a directory of ours): a child reads the copy, never a name a link could be swapped into."""
        with self.opened(path, what="capture") as found:
            _check_capture(found, path)
            try:
                target = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
                with os.fdopen(os.dup(found.fd), "rb") as source, os.fdopen(target, "wb") as copy:
                    source.seek(0)
                    shutil.copyfileobj(source, copy, 1 << 20)
            except OSError as e:  # a full disk
                raise DynscopeError(f"cannot copy {path} for the run: {e.strerror or e}") from None

    def relative(self, real: str) -> str:
        return os.path.relpath(real, self.root)

    def captures(self) -> Listing:
        """Capture files under the root (links not followed), relative to it, walked by descriptor."""
        from dynscope.store.header import header_from_fd
        from dynscope.store.schema import APPLICATION_ID

        listing = Listing()
        seen = 0
        # Depth first, in name order; each level holds one descriptor (at most MAX_LISTED_DEPTH + 1).
        stack: list[tuple[int, list[str], list[str]]] = [(os.dup(self.root_fd), [], _names_in(self.root_fd))]
        try:
            while stack:
                dir_fd, where, pending = stack[-1]
                if not pending:
                    os.close(dir_fd)
                    stack.pop()
                    continue
                name = pending.pop(0)
                seen += 1
                if seen > MAX_LISTED_ENTRIES or len(listing.captures) >= MAX_LISTED_CAPTURES:
                    listing.truncated = True
                    break
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if len(where) >= MAX_LISTED_DEPTH:
                        listing.too_deep.append(os.path.join(*where, name))
                        continue
                    try:
                        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=dir_fd)
                    except OSError:
                        continue
                    stack.append((child, [*where, name], _names_in(child)))
                    continue
                if not stat.S_ISREG(st.st_mode) or name.endswith(("-wal", "-shm", "-journal", ".lock")):
                    continue
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=dir_fd)
                except OSError:
                    continue
                try:
                    header = header_from_fd(fd)
                finally:
                    os.close(fd)
                if header is not None and header.application_id == APPLICATION_ID:
                    listing.captures.append(os.path.join(*where, name))
        finally:
            for dir_fd, _, _ in stack:
                os.close(dir_fd)
        return listing


@dataclass
class Listing:
    captures: list[str] = field(default_factory=list)
    truncated: bool = False  # stopped at MAX_LISTED_ENTRIES or MAX_LISTED_CAPTURES
    too_deep: list[str] = field(default_factory=list)  # directories past MAX_LISTED_DEPTH, not looked into


def _names_in(dir_fd: int) -> list[str]:
    """A directory's names, in order; at most MAX_LISTED_ENTRIES + 1 of them are read (a directory
    of millions would otherwise be held whole before the walk's own limit is reached)."""
    names: list[str] = []
    try:
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                names.append(entry.name)
                if len(names) > MAX_LISTED_ENTRIES:
                    break
    except OSError:
        return []
    return sorted(names)


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def _check_capture(found: Opened, path: str) -> None:
    from dynscope.store.header import header_from_fd
    from dynscope.store.schema import APPLICATION_ID

    header = header_from_fd(found.fd)
    if header is None or header.application_id != APPLICATION_ID:
        raise DynscopeError(f"{path} is not a dynscope capture")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"
