"""The capture file format: one SQLite database, versioned by ``PRAGMA user_version``.

A capture is an append-only log of events. Torch's structured-trace events keep their
own names (``dynamo_start``, ``aot_forward_graph``...); torch artifacts are stored as
``artifact:<name>``; events from dynscope's own probes are named ``dynscope:<what>``.
Payloads live in ``blobs``, compressed and keyed by content hash, so the same guard dump
or config text written by a thousand compiles is stored once.

Bump SCHEMA_VERSION on any incompatible change; readers refuse newer versions.
"""

SCHEMA_VERSION = 1

# "DYNS": lets a reader tell a capture from any other SQLite file before touching tables.
APPLICATION_ID = 0x44594E53

FILE_SUFFIX = ".dynscope"

DDL = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL               -- JSON
);
CREATE TABLE blobs (
    hash  TEXT PRIMARY KEY,           -- blake2b-128 of the uncompressed UTF-8 text
    codec TEXT NOT NULL,              -- 'zlib' or 'raw'
    size  INTEGER NOT NULL,           -- uncompressed bytes
    data  BLOB NOT NULL
);
CREATE TABLE events (
    id         INTEGER PRIMARY KEY,   -- arrival order
    ts         REAL NOT NULL,         -- unix time, seconds
    name       TEXT NOT NULL,
    compile_id TEXT,                  -- torch's "frame/compile" ("!ca/frame/compile" for compiled autograd)
    attempt    INTEGER,
    metadata   TEXT NOT NULL,         -- JSON object
    payload    TEXT REFERENCES blobs(hash)
);
CREATE INDEX events_by_name ON events(name, id);
CREATE INDEX events_by_compile ON events(compile_id, id);
"""
