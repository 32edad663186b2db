"""Open a capture for reading: validate it, then answer narrow, indexed queries.

Nothing read from a capture is ever executed or unpickled: rows are JSON text and
compressed UTF-8 payloads. The file is data, not a program: it is opened read-only, its
schema must be exactly ours before any query (no views, triggers or virtual tables: see
schema_check), every query has a time budget and SQLite a length limit, and every value is
checked for its type. Every failure surfaces as one CaptureError line.
"""

from __future__ import annotations

import functools
import os
import reprlib
import sqlite3
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from dynscope.errors import CaptureError
from dynscope.store import json_text
from dynscope.store.header import expected_size, file_size, header_from_fd, read_header, special_file_kind
from dynscope.store.json_text import JsonObject, JsonValue
from dynscope.store.payloads import DEFAULT_LIMIT, Payload, decode, truncation_note
from dynscope.store.schema import APPLICATION_ID, SCHEMA_VERSION
from dynscope.store.schema_check import check_schema

T = TypeVar("T")

# One query's time budget. Honest queries on a 137 MB capture take well under a second; a
# capture that passed the schema check cannot make one run long, so this is a second wall.
QUERY_SECONDS = 30.0
# The longest string or blob SQLite hands back from a query (metadata, meta values; payloads
# are streamed apart): the largest metadata of a real capture is ~40 KB.
MAX_VALUE_BYTES = 16 * 1024 * 1024
_PROGRESS_STEPS = 10_000  # SQLite VM instructions between two looks at the clock


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
    def __init__(self, path: str | os.PathLike[str], *, query_seconds: float = QUERY_SECONDS,
                 pinned: int | None = None) -> None:
        """``pinned``: a descriptor the caller opened ``path`` on (dynscope mcp, which walks each
        path from its root): the file is checked through it, and SQLite's own open of ``path``
        must land on that same file, or nothing is read."""
        self.path = os.fspath(path)
        _validate_file(self.path, pinned)
        self._lock = threading.RLock()
        self._query_seconds = query_seconds
        self._deadline = float("inf")
        before = _descriptors() if pinned is not None else {}
        try:
            self._db = _connect(self.path, self._past_deadline)
        except CaptureError as e:
            _refuse_if_swapped(self.path, pinned, e)
            raise
        if pinned is not None:
            _check_same_file(self._db, self.path, pinned, before)
        try:
            self._bounded(check_schema, self._db, self.path)  # before any other query
            self.meta: dict[str, Any] = {}
            for key, value in self._query("SELECT key, value FROM meta", ()):
                if not isinstance(key, str):
                    raise CaptureError(f"{self.path}: a meta key is {key!r}, not text: the capture was tampered with")
                self.meta[key] = json_text.loads(value, f"{self.path}: meta value {key!r}")
        except CaptureError as e:
            self._db.close()
            _refuse_if_swapped(self.path, pinned, e)  # SQLite opens its journal by name too
            raise

    def _past_deadline(self) -> bool:
        # SQLite's progress handler: a true answer interrupts the running statement.
        return time.monotonic() > self._deadline

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
        return [self._event(*row) for row in self._query(sql, args)]

    def _event(self, id_: int, ts: Any, name: Any, cid: Any, attempt: Any, meta: Any, digest: Any) -> Event:
        metadata = json_text.loads(meta, functools.partial(self._metadata_name, id_))
        # One quick test of every column's type (overviews read tens of thousands of rows);
        # only a row that fails it is looked at column by column, to say which is wrong.
        if not (type(metadata) is dict and type(name) is str and (type(ts) is float or type(ts) is int)
                and (cid is None or type(cid) is str) and (attempt is None or type(attempt) is int)
                and (digest is None or type(digest) is str)):
            row = _Row(self.path, id_)
            if not isinstance(metadata, dict):
                raise row.wrong("metadata", metadata, "a JSON object")
            row.check_columns(ts, name, cid, attempt)
            row.text_or_null("payload", digest)
        return Event(id_, float(ts), name, cid, attempt, metadata, digest)

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
        row = _Row(self.path, None)
        return [(row.text("compile_id", cid), row.text("name", name)) for cid, name in self._query(sql, args)]

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
        found = []
        for id_, ts, name, cid, attempt, values in self._query(sql, [*paths, *names]):
            # SQLite wrote this array itself, but from the row's metadata: its depth is the row's.
            values = json_text.loads(values, functools.partial(self._metadata_name, id_))
            if not isinstance(values, list):  # json_extract of several paths answers an array, always
                raise _Row(self.path, id_).wrong("metadata", values, "a JSON object")
            if not (type(name) is str and (type(ts) is float or type(ts) is int)
                    and (cid is None or type(cid) is str) and (attempt is None or type(attempt) is int)):
                _Row(self.path, id_).check_columns(ts, name, cid, attempt)
            found.append({"id": id_, "ts": float(ts), "name": name, "compile_id": cid, "attempt": attempt,
                          **dict(zip(fields, values))})
        return found

    def name_counts(self) -> dict[str, int]:
        """How many events of each kind the capture holds (one pass over the name index)."""
        row = _Row(self.path, None)
        return {row.text("name", name): count
                for name, count in self._query("SELECT name, count(*) FROM events GROUP BY name", ())}

    def payload(self, digest: str | None, *, limit: int = DEFAULT_LIMIT) -> str | None:
        """The payload's text, checked against its size and hash; past ``limit`` bytes it
        is cut and ends with a line saying so (views show that line as it is)."""
        found = self.payload_record(digest, limit=limit)
        if found is None:
            return None
        if found.truncated:
            return found.text + "\n" + truncation_note(limit, found.size) + "\n"
        return found.text

    def json_payload(self, digest: str | None, *, limit: int = DEFAULT_LIMIT) -> JsonValue:
        """A JSON payload parsed, or None when absent; one too large to parse whole is an error."""
        found = self.payload_record(digest, limit=limit) if digest is not None else None
        if digest is None or found is None:
            return None
        if found.truncated:
            raise CaptureError(f"payload {digest[:12]} is {found.size:,} bytes of JSON, over the "
                               f"{limit:,}-byte limit for structured data: not read")
        return json_text.loads(found.text, f"{self.path}: payload {digest[:12]}")

    def last_json_object(self, name: str) -> JsonObject | None:
        """The payload of the last ``name`` event that is a JSON object (a cumulative snapshot's
        latest state), or None when there is none."""
        for event in reversed(self.events([name])):
            value = self.json_payload(event.payload_hash)
            if isinstance(value, dict):
                return value
        return None

    def payload_record(self, digest: str | None, *, limit: int = DEFAULT_LIMIT) -> Payload | None:
        if digest is None:
            return None
        rows = self._query("SELECT rowid, codec, size, length(data) FROM blobs WHERE hash = ?", (digest,))
        if not rows:
            return None
        rowid, codec, size, stored = rows[0]
        if not isinstance(stored, int) or not isinstance(codec, str):
            raise CaptureError(f"{self.path}: payload {digest[:12]} is not stored as a payload is: "
                               "the capture was tampered with")
        with self._lock:
            chunks = self._blob_chunks(rowid)
            try:
                return decode(digest, codec, size, chunks, stored, limit)
            except sqlite3.DatabaseError as e:
                raise self._error(e) from None
            finally:
                chunks.close()  # release the blob handle now, not when garbage is collected

    def _blob_chunks(self, rowid: int) -> Generator[bytes, None, None]:
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
        if not rows:
            return 0
        size = rows[0][0]
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise CaptureError(f"{self.path}: payload {digest[:12]} declares the size {size!r}: "
                               "the capture was tampered with")
        return size

    def _query(self, sql: str, args: Iterable[Any]) -> list[tuple[Any, ...]]:
        def fetch() -> list[tuple[Any, ...]]:
            rows: list[tuple[Any, ...]] = self._db.execute(sql, tuple(args)).fetchall()
            return rows
        return self._bounded(fetch)

    def _bounded(self, action: Callable[..., T], *args: object) -> T:
        """Run ``action`` (SQL on this connection) within one query's time budget."""
        with self._lock:
            self._deadline = time.monotonic() + self._query_seconds
            try:
                return action(*args)
            except sqlite3.DatabaseError as e:
                raise self._error(e) from None
            finally:
                self._deadline = float("inf")

    def _metadata_name(self, event_id: int) -> str:
        """How an error names an event's metadata (made only for a row that is wrong)."""
        return _Row(self.path, event_id).what("metadata")

    def _error(self, e: sqlite3.DatabaseError) -> CaptureError:
        return _as_capture_error(self.path, e, self._query_seconds)


class _Row:
    """Type checks for the values of one row: SQLite stores whatever a file says, whatever
    the column's declared type (an integer compile id, a text attempt)."""

    def __init__(self, path: str, event_id: int | None) -> None:
        self.path, self.event_id = path, event_id

    def what(self, column: str) -> str:
        where = f"event {self.event_id}" if self.event_id is not None else "an event"
        return f"{self.path}: {where}'s {column}"

    def wrong(self, column: str, value: object, expected: str) -> CaptureError:
        # reprlib: a bad value may be megabytes long; its first characters say enough
        return CaptureError(f"{self.what(column)} is {reprlib.repr(value)}, not {expected}: "
                            "the capture was tampered with")

    def check_columns(self, ts: object, name: object, compile_id: object, attempt: object) -> None:
        """Raise for the first of an event's columns whose value is of the wrong type."""
        self.time(ts)
        self.text("name", name)
        self.text_or_null("compile_id", compile_id)
        self.int_or_null("attempt", attempt)

    def text(self, column: str, value: object) -> str:
        if not isinstance(value, str):
            raise self.wrong(column, value, "text")
        return value

    def text_or_null(self, column: str, value: object) -> str | None:
        return None if value is None else self.text(column, value)

    def int_or_null(self, column: str, value: object) -> int | None:
        if value is not None and not isinstance(value, int):
            raise self.wrong(column, value, "an integer")
        return value

    def time(self, value: object) -> float:
        if not isinstance(value, (int, float)):
            raise self.wrong("ts", value, "a time")
        return float(value)


def _validate_file(path: str, pinned: int | None = None) -> None:
    if pinned is None and not os.path.exists(path):
        raise CaptureError(f"no such capture: {path}")
    try:
        # Before any open: a FIFO would block it, a device would never end.
        kind = special_file_kind(path) if pinned is None else None
        if kind is not None:
            raise CaptureError(f"{path} is {kind}, not a capture file")
        header = read_header(path) if pinned is None else header_from_fd(pinned)
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
    size, expected = file_size(path) if pinned is None else os.fstat(pinned).st_size, expected_size(header)
    if expected and size < expected:
        raise CaptureError(f"{path} is truncated ({size} of {expected} bytes): the capture is damaged")


def _connect(path: str, past_deadline: Callable[[], bool]) -> sqlite3.Connection:
    """A read-only connection that runs only our SQL, bounded. (Read-only still reads a WAL
    left by a killed run; the file is never written through a reader.)"""
    # Quoted as bytes: a path may hold bytes that are not UTF-8 (a directory named b"cwd-\xff").
    uri = "file:" + urllib.parse.quote(os.fsencode(os.path.abspath(path))) + "?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, check_same_thread=False)
        # Before anything reads the schema: SQL functions in it may not run (trusted_schema),
        # every statement watches the clock, a value longer than the limit is an error
        # instead of memory, pages are checked as they are read, nothing can be attached,
        # no extension can be loaded (off by default; said here so it stays off).
        db.set_progress_handler(lambda: 1 if past_deadline() else 0, _PROGRESS_STEPS)
        if hasattr(db, "enable_load_extension"):
            db.enable_load_extension(False)
        if sys.version_info >= (3, 11):  # Connection.setlimit
            db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
            db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        for pragma in ("query_only=1", "trusted_schema=0", "cell_size_check=1", "mmap_size=0"):
            db.execute(f"PRAGMA {pragma}")
    except sqlite3.DatabaseError as e:
        raise _as_capture_error(path, e) from None
    return db


def _descriptors() -> dict[int, tuple[int, int]]:
    """This process's open descriptors and the file (device, inode) each is open on; empty
    where the system does not list them (/proc/self/fd)."""
    found: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for name in names:
        try:
            st = os.fstat(int(name))
        except (OSError, ValueError):
            continue
        found[int(name)] = (st.st_dev, st.st_ino)
    return found


def _check_same_file(db: sqlite3.Connection, path: str, pinned: int, before: dict[int, tuple[int, int]]) -> None:
    """SQLite opens ``path`` by name, in ``connect``: the descriptor it opened must be on the file
    ``pinned`` is (a link swapped in after the caller's check would be followed by that open)."""
    st = os.fstat(pinned)
    wanted = (st.st_dev, st.st_ino)
    after = _descriptors()
    if after or before:
        same = any(fd not in before and key == wanted for fd, key in after.items())
    else:  # no /proc: the name must still be the file (a narrower check)
        try:
            now = os.stat(path)
            same = (now.st_dev, now.st_ino) == wanted
        except OSError:
            same = False
    if not same:
        db.close()
        raise CaptureError(f"{path} changed while it was opened (another file took its name); not read")


def _refuse_if_swapped(path: str, pinned: int | None, error: CaptureError) -> None:
    """An error of SQLite's (which opens by name) on a pinned file whose name now names another
    file, or none, is that swap: said as such, not as SQLite's bare words. SQLite failing to open a
    file the caller holds open and checked is a swap too, even if the name was swapped back since."""
    if pinned is None:
        return
    if "unable to open database file" in str(error):
        raise CaptureError(f"{path} changed while it was opened (SQLite could not open it by name); not read")
    try:
        now, st = os.stat(path), os.fstat(pinned)
        if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
            return
    except OSError:
        pass
    raise CaptureError(f"{path} changed while it was opened (another file or none has its name now); not read")


def _as_capture_error(path: str, e: sqlite3.DatabaseError, seconds: float = QUERY_SECONDS) -> CaptureError:
    text = str(e)
    if text == "interrupted":
        return CaptureError(f"reading {path} took longer than {seconds:g} s: stopped (the capture is "
                            "damaged or hostile)")
    if "too big" in text:
        return CaptureError(f"{path} holds a value longer than {MAX_VALUE_BYTES // (1024 * 1024)} MB, more than "
                            "any capture writes: not read (the capture was tampered with)")
    if "malformed" in text or "not a database" in text:
        return CaptureError(f"{path} is damaged ({text}): it may be truncated")
    if "no such table" in text:
        return CaptureError(f"{path} is not a dynscope capture ({text})")
    return CaptureError(f"cannot read {path}: {text}")
