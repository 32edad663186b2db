"""Forging captures whose SQLite file is hostile (issue 20, items 4, 6, 13, 14): a real capture
written by the real writer, then its schema, rows or payloads rewritten with sqlite3 the way
an attacker would (sizes and hashes kept consistent where the attack is not about them).
Nothing here imports torch."""

from __future__ import annotations

import functools
import hashlib
import shutil
import sqlite3
import zlib
from pathlib import Path

from hostile import small_capture

MiB = 1 << 20

# Every SELECT on `events` runs forever (and grows a temporary table) once `events` is this view.
RECURSIVE_VIEW = """
DROP TABLE events;
CREATE VIEW events AS
  WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)
  SELECT i AS id, 1.0 AS ts, 'dynamo_start' AS name, '0/0' AS compile_id, 0 AS attempt,
         '{"pad": "' || printf('%.*c', 100000, 'x') || '"}' AS metadata, NULL AS payload FROM n;
"""

# One schema change per attack: what `sqlite_master` holds decides what a query runs.
SCHEMA_ATTACKS = {
    "recursive view as events": RECURSIVE_VIEW,
    "view as meta": "DROP TABLE meta; CREATE VIEW meta AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
                    "SELECT i + 1 FROM n) SELECT 'k' || i AS key, '1' AS value FROM n;",
    "trigger": "CREATE TRIGGER t AFTER INSERT ON events BEGIN DELETE FROM blobs; END;",
    "virtual table": "CREATE VIRTUAL TABLE notes USING fts5(body);",
    "extra table": "CREATE TABLE extra(x);",
    "expression index": "CREATE INDEX slow ON events(length(printf('%.*c', 100000000, 'x')));",
    "changed index": "DROP INDEX events_by_name; CREATE INDEX events_by_name ON events(name) WHERE id > 0;",
    "stat table": "ANALYZE;",
}


def capture(path: Path, **kwargs) -> Path:
    return small_capture(path, **kwargs)


def with_schema(path: Path, sql: str) -> Path:
    """The capture with ``sql`` run on it (the attacker's schema change)."""
    with sqlite3.connect(path) as db:
        db.executescript(sql)
    db.close()
    return path


def with_schema_in_wal(source: Path, path: Path, sql: str) -> Path:
    """A copy of ``source`` whose schema change lives only in a WAL file beside it (as a killed
    run leaves one): SQLite applies it when the capture is read."""
    work = source.with_name("wal-work.dynscope")
    shutil.copy(source, work)
    db = sqlite3.connect(work)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.executescript(sql)
    shutil.copy(work, path)
    shutil.copy(str(work) + "-wal", str(path) + "-wal")
    db.close()
    return path


def set_column(path: Path, column: str, value, where: str = "name = 'dynscope:graph_break'") -> None:
    """One column of some events set to ``value`` as it is (a BLOB stays a BLOB)."""
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE events SET {column} = ? WHERE {where}", (value,))
    db.close()


def set_meta(path: Path, key: str, value) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))
    db.close()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@functools.cache
def honest_payload(n_mib: int, line: str) -> tuple[str, int, bytes]:
    """(hash, size, zlib data) of ``line`` repeated to ``n_mib`` MiB: a well-formed payload
    (right hash, right size, a valid zlib stream) made without ever holding it whole.
    Each MiB is deflated once: after a full flush deflate starts afresh, so every MiB's
    compressed block is the same bytes."""
    chunk = (line * (MiB // len(line) + 1)).encode()[:MiB]
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflater.compress(chunk) + deflater.flush(zlib.Z_FULL_FLUSH)
    hasher, adler = hashlib.blake2b(digest_size=16), 1
    for _ in range(n_mib):
        hasher.update(chunk)
        adler = zlib.adler32(chunk, adler)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush()  # an empty final block
    data = b"\x78\xda" + block * n_mib + end + adler.to_bytes(4, "big")
    return hasher.hexdigest(), n_mib * MiB, data


def add_event_with_payload(path: Path, name: str, payload: tuple[str, int, bytes], *,
                           compile_id: str | None = "0/0") -> None:
    digest, size, data = payload
    with sqlite3.connect(path) as db:
        db.execute("INSERT OR REPLACE INTO blobs(hash, codec, size, data) VALUES (?, 'zlib', ?, ?)",
                   (digest, size, data))
        db.execute("INSERT INTO events(ts, name, compile_id, attempt, metadata, payload) "
                   "VALUES (1.5, ?, ?, 0, '{}', ?)", (name, compile_id, digest))
    db.close()


def vacuum(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("VACUUM")
    db.close()


# The command runs under a small launcher, so its peak RSS is its own (as in test_hostile_captures).
_LAUNCHER = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=open(sys.argv[1], "w"))
sys.exit(code)
"""


def run_measured(args: list[str], cwd: Path, *, timeout: float = 60.0, stdout=None) -> tuple[int, str, str, int, float]:
    """(exit code, stdout, stderr, peak RSS in bytes, seconds) of `dynscope ARGS` in a fresh
    process group; past ``timeout`` the whole group is killed and the test fails."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out_path, err_path, rss_path = cwd / "stdout.txt", cwd / "stderr.txt", cwd / "rss.txt"
    rss_path.unlink(missing_ok=True)
    started = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        child = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(rss_path), sys.executable, "-m", "dynscope",
                                  *args], cwd=cwd, stdout=stdout or out, stderr=err, stdin=subprocess.DEVNULL,
                                 env={**os.environ, "COLUMNS": "120"}, start_new_session=True)
        try:
            code = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            raise AssertionError(f"dynscope {' '.join(args)} still ran after {timeout} s") from None
    seconds = time.monotonic() - started
    return (code, out_path.read_text("utf-8", "replace"), err_path.read_text("utf-8", "replace"),
            int(rss_path.read_text()), seconds)
