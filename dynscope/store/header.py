"""Read the 100-byte SQLite header without opening the database.

This is how a reader tells "not a database", "not ours" and "truncated" apart before
SQLite gets a chance to report them as one vague "malformed" error.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass

from dynscope.store.schema import APPLICATION_ID

_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class SQLiteHeader:
    page_size: int
    page_count: int  # 0 when the header's count is stale (file written by an old SQLite)
    application_id: int
    user_version: int


def special_file_kind(path: str) -> str | None:
    """What ``path`` is when it is not a regular file ("a FIFO", "a directory"...), else None.
    Asked before any ``open``: opening a FIFO blocks until a writer comes, and a device
    (/dev/zero, /dev/random) never ends. Symbolic links are followed, like open does."""
    mode = os.stat(path).st_mode
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def read_header(path: str) -> SQLiteHeader | None:
    """The header, or None if the file is not an SQLite database (or not a regular file)."""
    if special_file_kind(path) is not None:
        return None
    # O_NONBLOCK: should the file become a FIFO between the check and here, open still returns.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        return header_from_fd(fd)
    finally:
        os.close(fd)


def header_from_fd(fd: int) -> SQLiteHeader | None:
    """The header of the file open on ``fd`` (read with pread: its offset is left alone), or
    None if it is not a regular file holding an SQLite database."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return None
    raw = os.pread(fd, 100, 0)
    if len(raw) < 100 or not raw.startswith(_MAGIC):
        return None
    (page_size,) = struct.unpack(">H", raw[16:18])
    page_size = 65536 if page_size == 1 else page_size
    change_counter, page_count = struct.unpack(">II", raw[24:32])
    (version_valid_for,) = struct.unpack(">I", raw[92:96])
    if version_valid_for != change_counter:
        page_count = 0
    (user_version,) = struct.unpack(">I", raw[60:64])
    (application_id,) = struct.unpack(">I", raw[68:72])
    return SQLiteHeader(page_size, page_count, application_id, user_version)


def is_capture_file(path: str) -> bool:
    try:
        header = read_header(path)
    except OSError:
        return False
    return header is not None and header.application_id == APPLICATION_ID


def is_sqlite_file(path: str) -> bool:
    """Any SQLite database (a capture whose application id was changed is one too)."""
    try:
        return read_header(path) is not None
    except OSError:
        return False


def expected_size(header: SQLiteHeader) -> int:
    return header.page_size * header.page_count


def file_size(path: str) -> int:
    return os.path.getsize(path)
