"""Crafting hostile captures: a real capture file, then its rows rewritten the way an
attacker would (nothing here imports torch)."""

from __future__ import annotations

import functools
import json
import sqlite3
import zlib
from pathlib import Path

from dynscope.store.writer import CaptureWriter, payload_hash


def small_capture(path: Path, *, strings: str = "x", payload: str = "def forward(x):\n    return x\n") -> Path:
    """A capture with a run, one compile's Dynamo graph stage and a graph break, written by
    the real writer (the same event names a recorded run has)."""
    writer = CaptureWriter(path)
    writer.set_meta(dynscope_version="0", torch_version="2.13.0", python="3.11", cwd=str(path.parent),
                    command=["dynscope", "explain", "prog.py"], started=1.0, finished=2.0, exit_code=0)
    writer.append("dynamo_start", {"dynamo_start": {"stack": [{"line": 3, "name": strings, "filename": 0}]}},
                  compile_id="0/0", attempt=0)
    writer.append("dynamo_output_graph", {"dynamo_output_graph": {"sizes": {}}}, payload, compile_id="0/0", attempt=0)
    writer.append("dynscope:graph_break", {"gb_type": strings, "reason": strings, "explanation": strings,
                                           "hints": [strings],
                                           "user_stack": [{"file": strings, "line": 3, "function": strings, "code": strings}]},
                  compile_id="0/0", attempt=0)
    writer.close()
    return path


def blobs(path: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(path) as db:
        return list(db.execute("SELECT hash, codec, size FROM blobs"))


def replace_blob(path: Path, digest: str, *, codec: str, size: int, data: bytes) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE blobs SET codec = ?, size = ?, data = ? WHERE hash = ?", (codec, size, data, digest))


@functools.cache
def zlib_bomb(uncompressed: int) -> bytes:
    """``uncompressed`` bytes of 'A' deflated (~1000:1), made once per size and without holding them all."""
    deflater = zlib.compressobj(9)  # the best ratio: a bomb's compressed bytes must fit its declared size
    chunk = b"A" * (1 << 20)
    parts = [deflater.compress(chunk) for _ in range(uncompressed >> 20)]
    return b"".join(parts) + deflater.flush()


def add_payload(path: Path, text: str) -> str:
    """Store ``text`` as a well-formed blob (right hash and size) and return its hash."""
    digest = payload_hash(text)
    raw = text.encode("utf-8", "surrogatepass")
    with sqlite3.connect(path) as db:
        db.execute("INSERT OR REPLACE INTO blobs(hash, codec, size, data) VALUES (?, 'zlib', ?, ?)",
                   (digest, len(raw), zlib.compress(raw)))
    return digest


def point_event_at(path: Path, name: str, digest: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE events SET payload = ? WHERE name = ?", (digest, name))


def set_strings(path: Path, value: str) -> None:
    """Every string in every event's metadata and in the run's meta replaced by ``value``."""
    def swap(obj):
        if isinstance(obj, str):
            return value
        if isinstance(obj, list):
            return [swap(v) for v in obj]
        if isinstance(obj, dict):
            return {k: swap(v) for k, v in obj.items()}
        return obj

    with sqlite3.connect(path) as db:
        for id_, meta in list(db.execute("SELECT id, metadata FROM events")):
            db.execute("UPDATE events SET metadata = ? WHERE id = ?", (json.dumps(swap(json.loads(meta))), id_))
