"""Open a capture for reading: validate it, then answer narrow, indexed queries.

Nothing read from a capture is ever executed or unpickled: rows are JSON text and
compressed UTF-8 payloads. Every SQLite failure surfaces as one CaptureError line.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dynscope.store.payloads import DEFAULT_LIMIT, Payload, decode, truncation_note
from dynscope.store.header import expected_size, file_size, read_header
from dynscope.store.schema import APPLICATION_ID, SCHEMA_VERSION
from dynscope.errors import CaptureError


@dataclass(frozen=True)
class Event:
    id: int
    ts: float
    name: str
    compile_id: str | None
    attempt: int | None
    metadata: dict[str, Any]
    payload_hash: str | None


class CaptureReader:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        _validate_file(self.path)
        self._lock = threading.RLock()
        try:
            self._db = _connect(self.path)
            self.meta: dict[str, Any] = {
                key: json.loads(value) for key, value in self._db.execute("SELECT key, value FROM meta")
            }
        except sqlite3.DatabaseError as e:
            raise _as_capture_error(self.path, e) from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- queries -------------------------------------------------------------------------

    def events(
        self,
        names: Iterable[str] | None = None,
        *,
        compile_id: str | None = None,
        name_prefix: str | None = None,
    ) -> list[Event]:
        where, args = [], []
        if names is not None:
            names = list(names)
            where.append(f"name IN ({','.join('?' * len(names))})")
            args += names
        if name_prefix is not None:
            where.append("name >= ? AND name < ?")
            args += [name_prefix, name_prefix + "\U0010ffff"]
        if compile_id is not None:
            where.append("compile_id = ?")
            args.append(compile_id)
        sql = "SELECT id, ts, name, compile_id, attempt, metadata, payload FROM events"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id"
        return [
            Event(id_, ts, name, cid, attempt, json.loads(meta), digest)
            for id_, ts, name, cid, attempt, meta, digest in self._query(sql, args)
        ]

    def compile_event_names(self, names: Iterable[str] | None = None, name_like: str | None = None) -> list[tuple[str, str]]:
        """(compile_id, name) pairs, distinct; cheap: no metadata or payload is read."""
        where, args = ["compile_id IS NOT NULL"], []
        if names is not None:
            names = list(names)
            clause = f"name IN ({','.join('?' * len(names))})"
            if name_like is not None:
                clause = f"({clause} OR name LIKE ?)"
                args += names + [name_like]
            else:
                args += names
            where.append(clause)
        sql = "SELECT DISTINCT compile_id, name FROM events WHERE " + " AND ".join(where)
        return [(cid, name) for cid, name in self._query(sql, args)]

    def event_fields(self, names: Iterable[str], fields: dict[str, str]) -> list[dict[str, Any]]:
        """Selected metadata fields of events, extracted by SQLite (JSON paths like
        '$.compilation_metrics.co_name') rather than parsing whole metadata in Python: the
        metadata of a compile's metrics is ~10 KB, and overviews list thousands of compiles.
        Values come back as JSON has them (true stays True, a list a list); absent is None."""
        names = list(names)
        # json_extract with several paths answers one JSON array: types kept, one small parse a row.
        paths = list(fields.values()) * (2 if len(fields) == 1 else 1)
        sql = (f"SELECT id, ts, name, compile_id, attempt, json_extract(metadata{', ?' * len(paths)}) FROM events "
               f"WHERE name IN ({','.join('?' * len(names))}) ORDER BY id")
        rows = self._query(sql, [*paths, *names])
        keys = ["id", "ts", "name", "compile_id", "attempt"]
        return [{**dict(zip(keys, row[:5])), **dict(zip(fields, json.loads(row[5])))} for row in rows]

    def name_counts(self) -> dict[str, int]:
        """How many events of each kind the capture holds (one pass over the name index)."""
        return dict(self._query("SELECT name, count(*) FROM events GROUP BY name", ()))

    def payload(self, digest: str | None, *, limit: int = DEFAULT_LIMIT) -> str | None:
        """The payload's text, checked against its size and hash; past ``limit`` bytes it
        is cut and ends with a line saying so (views show that line as it is)."""
        found = self.payload_record(digest, limit=limit)
        if found is None:
            return None
        if found.truncated:
            return found.text + "\n" + truncation_note(limit, found.size) + "\n"
        return found.text

    def json_payload(self, digest: str | None, *, limit: int = DEFAULT_LIMIT) -> object:
        """A JSON payload parsed, or None when absent; one too large to parse whole is an error."""
        found = self.payload_record(digest, limit=limit)
        if found is None:
            return None
        if found.truncated:
            raise CaptureError(f"payload {digest[:12]} is {found.size:,} bytes of JSON, over the "
                               f"{limit:,}-byte limit for structured data: not read")
        return json.loads(found.text)

    def payload_record(self, digest: str | None, *, limit: int = DEFAULT_LIMIT) -> Payload | None:
        if digest is None:
            return None
        rows = self._query("SELECT rowid, codec, size, length(data) FROM blobs WHERE hash = ?", (digest,))
        if not rows:
            return None
        rowid, codec, size, stored = rows[0]
        with self._lock:
            chunks = self._blob_chunks(rowid)
            try:
                return decode(digest, codec, size, chunks, stored, limit)
            except sqlite3.DatabaseError as e:
                raise _as_capture_error(self.path, e) from None
            finally:
                chunks.close()  # release the blob handle now, not when garbage is collected

    def _blob_chunks(self, rowid: int):
        # Stream the stored bytes, so a huge blob is never held whole (Python 3.11+ has
        # incremental blob I/O; older Pythons read the value at once).
        if hasattr(self._db, "blobopen"):
            with self._db.blobopen("blobs", "data", rowid, readonly=True) as blob:
                while piece := blob.read(1 << 20):
                    yield piece
        else:
            (data,) = self._db.execute("SELECT data FROM blobs WHERE rowid = ?", (rowid,)).fetchone()
            yield bytes(data)

    def payload_size(self, digest: str | None) -> int:
        if digest is None:
            return 0
        rows = self._query("SELECT size FROM blobs WHERE hash = ?", (digest,))
        return rows[0][0] if rows else 0

    def _query(self, sql: str, args: Iterable[Any]) -> list[tuple]:
        with self._lock:
            try:
                return self._db.execute(sql, tuple(args)).fetchall()
            except sqlite3.DatabaseError as e:
                raise _as_capture_error(self.path, e) from None


def _validate_file(path: str) -> None:
    if not os.path.exists(path):
        raise CaptureError(f"no such capture: {path}")
    if os.path.isdir(path):
        raise CaptureError(f"{path} is a directory, not a capture file")
    try:
        header = read_header(path)
    except OSError as e:
        raise CaptureError(f"cannot read {path}: {e.strerror}") from None
    if header is None:
        raise CaptureError(f"{path} is not a dynscope capture (not an SQLite database)")
    if header.application_id != APPLICATION_ID:
        raise CaptureError(f"{path} is an SQLite database but not a dynscope capture")
    if header.user_version > SCHEMA_VERSION:
        raise CaptureError(
            f"{path} was written by a newer dynscope (capture schema {header.user_version}; "
            f"this version reads up to {SCHEMA_VERSION}): upgrade dynscope to read it"
        )
    size, expected = file_size(path), expected_size(header)
    if expected and size < expected:
        raise CaptureError(f"{path} is truncated ({size} of {expected} bytes): the capture is damaged")


def _connect(path: str) -> sqlite3.Connection:
    # Read-write when we may, so SQLite can fold a WAL left by a killed run back into the
    # file; read-only otherwise. We never write through a reader connection.
    if os.access(path, os.W_OK) and os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
        db = sqlite3.connect(path, check_same_thread=False)
    else:
        uri = "file:" + urllib.request.pathname2url(os.path.abspath(path)) + "?mode=ro"
        db = sqlite3.connect(uri, uri=True, check_same_thread=False)
    db.execute("PRAGMA query_only=1")
    return db


def _as_capture_error(path: str, e: sqlite3.DatabaseError) -> CaptureError:
    text = str(e)
    if "malformed" in text or "not a database" in text:
        return CaptureError(f"{path} is damaged ({text}): it may be truncated")
    if "no such table" in text:
        return CaptureError(f"{path} is not a dynscope capture ({text})")
    return CaptureError(f"cannot read {path}: {text}")
