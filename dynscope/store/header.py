"""Read the 100-byte SQLite header without opening the database.

This is how a reader tells "not a database", "not ours" and "truncated" apart before
SQLite gets a chance to report them as one vague "malformed" error.
"""

from __future__ import annotations

import os
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


def read_header(path: str) -> SQLiteHeader | None:
    """The header, or None if the file is not an SQLite database."""
    with open(path, "rb") as f:
        raw = f.read(100)
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


def expected_size(header: SQLiteHeader) -> int:
    return header.page_size * header.page_count


def file_size(path: str) -> int:
    return os.path.getsize(path)
