"""Reading a file a stranger may have named: only a regular file, never more than a limit. A FIFO
would block a plain ``open`` and ``/dev/zero`` never ends (fix's patches and source files, the
reader's source excerpts)."""

from __future__ import annotations

import os
import stat

from dynscope.store.lock import file_kind


class NotRegular(OSError):
    """A FIFO, device, socket or directory where a file was expected, or a file over the limit."""


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes. A special file is refused before it is
    opened (a FIFO would block, ``/dev/zero`` never ends), and again on the descriptor, opened without
    blocking, should one be swapped in between; at most ``limit`` bytes are read whatever fstat said."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegular(f"it is {file_kind(mode)}, not a regular file")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(f"it is {file_kind(info.st_mode)}, not a regular file")
        data = f.read(limit + 1) if info.st_size <= limit else b""
    if info.st_size > limit or len(data) > limit:
        raise NotRegular(f"larger than {limit >> 20} MiB")
    return data
