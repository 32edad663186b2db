"""Append events to a capture as they happen, so that a crash loses nothing already seen.

Every event is its own small WAL transaction (``synchronous=NORMAL``): a SIGKILL of the
process keeps every committed event, and the next reader folds the WAL back into the file.
``close()`` checkpoints and leaves a single self-contained file.

Completeness: a new capture says ``complete: false`` from its first byte on, and only a
writer that closes it without a failed write says ``complete: true``. A write that fails
(a full disk, a blob SQLite cannot hold) stops the recording and records why in
``incomplete_reason``; a writer killed before ``close()`` leaves ``complete: false`` with no
reason (the launcher of ``explain``, which outlives its child, settles that case: see
``mark_ended``: an ``os._exit`` is complete, a program killed by a signal is not). Captures
written before this mark existed have neither key.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import sys
import threading
import time
import zlib
from types import TracebackType
from typing import Any

from dynscope.errors import CaptureError
from dynscope.store.header import is_capture_file
from dynscope.store.lock import file_kind
from dynscope.store.schema import APPLICATION_ID, DDL, SCHEMA_VERSION
from dynscope.store.schema_check import check_schema

# Payloads smaller than this are stored as-is: compressing them saves nothing worth the CPU.
_COMPRESS_MIN_BYTES = 256


def _json(value: Any) -> str:
    return json.dumps(value, default=str, separators=(",", ":"))


def payload_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class CaptureWriter:
    """Thread-safe, fork-aware appender. Only the process that opened it writes."""

    def __init__(self, path: str | os.PathLike[str], *, bulk: bool = False) -> None:
        """``bulk``: many events per transaction (``dynscope import``, which can simply rerun)."""
        self.path = os.fspath(path)
        self._bulk = bulk
        self._pending = 0
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._held_for_fork = False
        self._known_blobs: set[str] = set()
        self._created = True  # this writer made the capture: its clean close makes it complete
        self.cut: str | None = None  # why recording stopped early, once a write failed
        _remove_capture_files(self.path)
        self._db = None
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=OFF" if bulk else "PRAGMA synchronous=NORMAL")
            self._db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._db.executescript(f"BEGIN; {DDL} INSERT INTO meta(key, value) VALUES ('complete', 'false'); COMMIT;")
            # Put the header (application id, schema version) into the main file now: until a
            # checkpoint it lives only in the WAL, and a killed run must still be recognizable.
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as e:
            if self._db is not None:
                self._db.close()
            raise CaptureError(f"cannot write capture {self.path}: {e}") from None

    @classmethod
    def reopen(cls, path: str | os.PathLike[str]) -> CaptureWriter:
        """Append to an existing capture (the launcher adds the run's end to the child's file)."""
        self = cls.__new__(cls)
        self.path = os.fspath(path)
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._held_for_fork = False
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            # The file may have come from elsewhere (fix --from, minify --from record into it): a
            # trigger in it would run on our INSERT. Only our own schema is written to.
            self._db.execute("PRAGMA trusted_schema=OFF")
            check_schema(self._db, self.path)
        except (CaptureError, sqlite3.Error):
            self._db.close()
            raise
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._bulk = False
        self._pending = 0
        self._created = False  # appends to another writer's capture: leaves its completeness alone
        self.cut = None
        self._known_blobs = {row[0] for row in self._db.execute("SELECT hash FROM blobs")}
        return self

    def mark_ended(self, *, killed_by: int | None) -> None:
        """The process that wrote this capture has ended (the launcher saw it exit or die) and
        left no word on completeness: it never reached ``close()``. Its events are all committed.
        Ended by itself (``os._exit``), the recording saw the whole run: complete. Killed by a
        signal, the run was cut where the recording stops: incomplete, saying so. A cut the
        writer recorded (a failed write) stays as it is."""
        self._settle(None if killed_by is None else
                     f"the program was killed by signal {killed_by}{_signal_name(killed_by)} before it ended")

    def mark_unclosed(self, reason: str) -> None:
        """Its writer has ended without closing it, and nobody saw how (a child process of the
        program, which left through ``os._exit`` or was killed): incomplete, saying ``reason``."""
        self._settle(reason)

    def _settle(self, incomplete_reason: str | None) -> None:
        if not self._owned():
            return
        with self._lock:
            try:
                rows = dict(self._open_db.execute(
                    "SELECT key, value FROM meta WHERE key IN ('complete', 'incomplete_reason')"))
                if rows.get("complete") != "false" or "incomplete_reason" in rows:
                    return
                if incomplete_reason is None:
                    with self._transaction():
                        self._open_db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('complete', 'true')")
                else:
                    self._mark_incomplete(self._open_db, incomplete_reason)
            except sqlite3.Error as e:
                self._stop_writing(e)

    # -- writing -----------------------------------------------------------------------

    def set_meta(self, **values: Any) -> None:
        if not self._owned():
            return
        with self._lock:
            try:
                with self._transaction():
                    self._open_db.executemany(
                        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                        [(k, _json(v)) for k, v in values.items()],
                    )
            except sqlite3.Error as e:
                self._stop_writing(e)

    def append(
        self,
        name: str,
        metadata: dict[str, Any],
        payload: str | None = None,
        *,
        compile_id: str | None = None,
        attempt: int | None = None,
        ts: float | None = None,
    ) -> int | None:
        """Write one event in its own transaction; returns its id (None if not ours to write)."""
        if not self._owned():
            return None
        meta_json = _json(metadata)
        blob = self._prepare_blob(payload) if payload is not None else None
        with self._lock:
            if self._db is None:
                return None
            try:
                return self._insert(name, meta_json, blob, compile_id, attempt, ts)
            except sqlite3.Error as e:
                self._stop_writing(e)
                return None

    def _insert(self, name: str, meta_json: str, blob: tuple[str, str, int, bytes] | None, compile_id: str | None,
                attempt: int | None, ts: float | None) -> int | None:
        with self._transaction(bulk=self._bulk):
            digest = None
            if blob is not None:
                digest, codec, size, data = blob
                if digest not in self._known_blobs:
                    self._open_db.execute(
                        "INSERT OR IGNORE INTO blobs(hash, codec, size, data) VALUES (?, ?, ?, ?)",
                        (digest, codec, size, data),
                    )
                    self._known_blobs.add(digest)
            cursor = self._open_db.execute(
                "INSERT INTO events(ts, name, compile_id, attempt, metadata, payload)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (time.time() if ts is None else ts, name, compile_id, attempt, meta_json, digest),
            )
        return cursor.lastrowid

    def close(self, *, incomplete: str | None = None) -> None:
        """Mark the capture complete (or, given ``incomplete``, say why it is not), checkpoint
        the WAL into the file and switch back to a single-file journal."""
        with self._lock:
            if self._db is None or not self._owned():
                return
            try:
                if self._db.in_transaction:
                    self._db.execute("COMMIT")
                if incomplete is not None:
                    self._mark_incomplete(self._db, incomplete)
                elif self._created:
                    with self._transaction():
                        self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('complete', 'true')")
            except sqlite3.Error as e:
                self._stop_writing(e)
                return
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self._db.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.Error:
                pass  # another reader holds the WAL open; it folds it in on its own close
            self._db.close()
            self._db = None

    # -- os.fork (dynscope.recorder's fork hooks) -----------------------------------------------

    def hold_for_fork(self) -> None:
        """Before a fork: wait for the event being written, so that the child's copy of the
        connection is not in the middle of a transaction."""
        self._held_for_fork = self._lock.acquire(timeout=_FORK_WAIT_S)

    def release_after_fork(self) -> None:
        if self._held_for_fork:
            self._held_for_fork = False
            self._lock.release()

    def abandon_in_forked_child(self) -> None:
        """In the forked child: this connection is the parent's. It is never written through
        (``_owned``); dropping it here closes the child's copy while no transaction is open,
        which leaves the parent's file, WAL and locks as they are."""
        self.release_after_fork()
        self._db = None

    # -- internals -----------------------------------------------------------------------

    def _stop_writing(self, error: sqlite3.Error) -> None:
        """A write failed (disk full, file removed): keep what is written, stop recording,
        mark the capture incomplete, and say so once. The program goes on; an exception here
        would land inside torch. A bulk writer (``dynscope import``) leaves the saying to its caller."""
        why = "the disk is full" if "full" in str(error) else str(error)
        self.cut = why
        if not self._bulk:
            print(f"dynscope: stopped recording to {self.path}: {why}; the capture keeps everything "
                  "recorded before this point", file=sys.stderr)
        reason = f"a write failed ({why}) and recording stopped there"
        marked = False
        try:
            if self._open_db.in_transaction:
                self._open_db.execute("ROLLBACK")
            # The rolled-back write already took the space this small one needs, most times.
            self._mark_incomplete(self._open_db, reason)
            marked = True
        except sqlite3.Error:
            pass
        try:
            self._open_db.close()
        except sqlite3.Error:
            pass
        self._db = None
        if not marked:  # closing may have freed the WAL's space: one more try
            try:
                db = sqlite3.connect(self.path, isolation_level=None)
                try:
                    self._mark_incomplete(db, reason)
                finally:
                    db.close()
            except sqlite3.Error:
                pass  # the capture still says complete: false, with no reason: the reader says "never ended"

    @staticmethod
    def _mark_incomplete(db: sqlite3.Connection, reason: str) -> None:
        db.execute("BEGIN")
        try:
            db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                           [("complete", "false"), ("incomplete_reason", _json(reason))])
            db.execute("COMMIT")
        except sqlite3.Error:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    @property
    def _open_db(self) -> sqlite3.Connection:
        """The connection, where the caller knows it is open (``_owned()`` said so); closed, a
        sqlite3.Error, which every write path already answers by stopping the recording."""
        if self._db is None:
            raise sqlite3.ProgrammingError(f"{self.path}: the capture is closed")
        return self._db

    def _owned(self) -> bool:
        # A forked child (dataloader worker, compile worker) must never write through a
        # connection it inherited: SQLite connections are not fork-safe.
        return self._db is not None and os.getpid() == self._pid

    def _prepare_blob(self, text: str) -> tuple[str, str, int, bytes]:
        digest = payload_hash(text)
        if digest in self._known_blobs:
            return digest, "", 0, b""
        raw = text.encode("utf-8", "surrogatepass")
        if len(raw) < _COMPRESS_MIN_BYTES:
            return digest, "raw", len(raw), raw
        # Bulk imports trade a little size for speed (level 1 compresses several times faster).
        return digest, "zlib", len(raw), zlib.compress(raw, 1 if self._bulk else 6)

    def _transaction(self, *, bulk: bool = False) -> _Transaction:
        if bulk:
            self._pending += 1
            if self._pending >= _BULK_EVENTS:
                self._pending = 0
                return _Transaction(self._open_db, commit=True)
            return _Transaction(self._open_db, commit=False)
        return _Transaction(self._open_db)


# How long a fork waits for an event being written (a write takes milliseconds; a stuck disk
# must not hang the program's fork).
_FORK_WAIT_S = 5.0

# In bulk mode, events committed together (one transaction per event would bound an import
# to a few thousand events a second).
_BULK_EVENTS = 5000


class _Transaction:
    def __init__(self, db: sqlite3.Connection, *, commit: bool = True) -> None:
        self._db = db
        self._commit = commit

    def __enter__(self) -> None:
        if not self._db.in_transaction:
            self._db.execute("BEGIN")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc_type:
            self._db.execute("ROLLBACK")
        elif self._commit:
            self._db.execute("COMMIT")


def _signal_name(number: int) -> str:
    import signal

    try:
        return f" ({signal.Signals(number).name})"
    except ValueError:
        return ""


def check_capture_target(path: str) -> None:
    """Refuse, before opening anything, a path a capture must not be written over: a
    directory, a symlink (whose target is not ours to replace), a FIFO or device (opening one
    blocks or has effects; removing /dev/null as root breaks the machine), or a file that is
    not a capture."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as e:
        raise CaptureError(f"cannot write capture {path}: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise CaptureError(f"cannot write capture {path}: it is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise CaptureError(f"refusing to write capture {path}: it is {file_kind(st.st_mode)}; "
                           "choose another output")
    if st.st_size > 0 and not is_capture_file(path):
        raise CaptureError(f"refusing to overwrite {path}: it is not a dynscope capture")


def _remove_capture_files(path: str) -> None:
    check_capture_target(path)
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass
        except OSError as e:  # a read-only directory or file system
            raise CaptureError(f"cannot write capture {path}: {e.strerror}") from None
