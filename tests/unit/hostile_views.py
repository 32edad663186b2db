"""Forging captures and TORCH_TRACE logs whose every string is hostile to whoever shows it
(issue 20 item 5). A recorded capture is copied and rewritten with sqlite3, payload hashes and
sizes recomputed, so every integrity check passes and only the content is hostile. Nothing
here imports torch."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
import sqlite3
import zlib
from pathlib import Path

from dynscope.store.writer import payload_hash

RECORDED = Path(__file__).resolve().parents[1] / "data" / "captures" / "2.13.0+cpu"
TRACE_LOG = (Path(__file__).resolve().parents[1] / "data" / "torch_trace" / "graph_breaks_eager"
             / "dedicated_log_torch_trace_recorded.log.gz")

# Every kind of sequence a terminal (or a Markdown/HTML viewer, or a CI log) would act on:
# OSC 0 (window title), OSC 8 (hyperlink), OSC 52 (clipboard), CSI (clear screen), C1 CSI,
# bidi overrides and isolates, NUL, BEL, CR, DEL, a lone surrogate (not encodable as UTF-8),
# and markup for rich, Markdown, HTML and GitHub workflow commands.
HOSTILE = ("\x1b]0;pwned-title\x07\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
           "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b31m\u202egnp.exe\u2066x\u2069\u061c\u200f\x00\r\x7f"
           "<script>alert(1)</script>[link](https://evil.example/) [bold]b[/] %0A::error::forged"
           " [/] [link=https://evil.example/]L[/link] $(touch marker) `touch marker`")

# What may reach an output: no C0 control but tab and newline, no DEL, no C1, no bidi control,
# no lone surrogate.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

# JSON can carry a lone surrogate ("\\ud800"); no output encoding can write one.
SURROGATE = "\ud800"

# A capture's file name can hold control characters too (from a tarball).
HOSTILE_NAME = "c\x1b]0;name\x07\u202e\x9b"


def unsafe_in(text: str) -> list[str]:
    """The unsafe characters in ``text`` (escaped, for an assertion message)."""
    return sorted({ascii(m.group()) for m in UNSAFE.finditer(text)})


def unsafe_in_bytes(data: bytes) -> list[str]:
    """Unsafe characters in an output file or stream: as UTF-8 text, and as raw single bytes
    (a C1 byte such as 0x9b on its own is a CSI to an 8-bit terminal)."""
    text = data.decode("utf-8", "surrogateescape")
    found = unsafe_in(text.replace("\udc9b", "\x9b"))
    return found


def _spoil(value, hostile: str = HOSTILE, keep: tuple[str, ...] = ()):
    """Every string in a JSON value with ``hostile`` appended (keys kept: they are the format;
    so are the values of the keys in ``keep``)."""
    if isinstance(value, str):
        return value + hostile
    if isinstance(value, list):
        return [_spoil(v, hostile, keep) for v in value]
    if isinstance(value, dict):
        return {k: v if k in keep else _spoil(v, hostile, keep) for k, v in value.items()}
    return value


def _spoil_text(text: str) -> str:
    """A payload: JSON stays JSON with its strings spoiled; any other text gets HOSTILE at the
    end of every line (generated code, guards, IR...)."""
    try:
        value = json.loads(text)
    except ValueError:
        return "\n".join(line + HOSTILE for line in text.split("\n"))
    return json.dumps(_spoil(value))


def forge(recorded: str, directory: Path, *, name: str = HOSTILE_NAME, compile_ids: bool = False) -> Path:
    """A copy of the recorded capture ``recorded`` whose every string field holds HOSTILE: the
    run's meta (command, cwd, versions...), every event's metadata, every payload, and with
    ``compile_ids`` the compile id column too."""
    path = directory / f"{name}.dynscope"
    shutil.copyfile(RECORDED / f"{recorded}.dynscope", path)
    with sqlite3.connect(path) as db:
        for key, value in list(db.execute("SELECT key, value FROM meta")):
            db.execute("UPDATE meta SET value = ? WHERE key = ?", (json.dumps(_spoil(json.loads(value))), key))
        for id_, meta in list(db.execute("SELECT id, metadata FROM events")):
            db.execute("UPDATE events SET metadata = ? WHERE id = ?", (json.dumps(_spoil(json.loads(meta))), id_))
        if compile_ids:
            db.execute("UPDATE events SET compile_id = compile_id || ? WHERE compile_id IS NOT NULL", (HOSTILE,))
        for digest, codec, data in list(db.execute("SELECT hash, codec, data FROM blobs")):
            raw = zlib.decompress(data) if codec == "zlib" else bytes(data)
            text = _spoil_text(raw.decode("utf-8", "surrogatepass"))
            new_raw = text.encode("utf-8", "surrogatepass")
            new_digest = payload_hash(text)
            db.execute("DELETE FROM blobs WHERE hash = ?", (digest,))
            db.execute("INSERT OR REPLACE INTO blobs(hash, codec, size, data) VALUES (?, 'zlib', ?, ?)",
                       (new_digest, len(new_raw), zlib.compress(new_raw)))
            db.execute("UPDATE events SET payload = ? WHERE payload = ?", (new_digest, digest))
    return path


def forge_trace_log(directory: Path) -> Path:
    """The recorded TORCH_TRACE log with every string of every record's header and payload
    spoiled, each payload's md5 recomputed (so the importer sees a whole, well-formed log),
    plus one unreadable line holding HOSTILE and one event whose kind is HOSTILE."""
    lines = gzip.decompress(TRACE_LOG.read_bytes()).decode("utf-8").split("\n")
    records: list[tuple[str, dict, list[str]]] = []
    for line in lines:
        if line.startswith("\t") and records:
            records[-1][2].append(line[1:])
        elif "] {" in line:
            prefix, _, rest = line.partition("] ")
            records.append((prefix, json.loads(rest), []))
    out: list[str] = [f"V1123 22:31:55.403000 6659 x.py:1] not json {HOSTILE}",
                      # An event of a kind dynscope does not know: import names the kinds it kept.
                      f"V1123 22:31:55.403000 6659 x.py:1] {json.dumps({'evil' + HOSTILE: {}})}"]
    for prefix, header, payload in records:
        had_payload = "has_payload" in header
        header = _spoil({k: v for k, v in header.items() if k != "has_payload"})
        text = _spoil_text("\n".join(payload)) if payload else ""
        if had_payload:
            header["has_payload"] = hashlib.md5(text.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()
        out.append(f"{prefix}] {json.dumps(header)}")
        out += ["\t" + part for part in text.split("\n")] if payload else []
    path = directory / "dedicated_log_torch_trace_hostile.log"
    path.write_bytes("\n".join(out).encode("utf-8", "surrogatepass") + b"\n")
    return path


def forge_surrogates(recorded: str, directory: Path, *, keep: tuple[str, ...] = ()) -> Path:
    """A copy of a recorded capture whose meta and event metadata strings end in a lone
    surrogate (as JSON escapes), but for the values of the keys in ``keep``."""
    path = directory / f"{recorded}-surrogates.dynscope"
    shutil.copyfile(RECORDED / f"{recorded}.dynscope", path)
    with sqlite3.connect(path) as db:
        for key, value in list(db.execute("SELECT key, value FROM meta")):
            db.execute("UPDATE meta SET value = ? WHERE key = ?", (json.dumps(_spoil(json.loads(value), SURROGATE)), key))
        for id_, meta in list(db.execute("SELECT id, metadata FROM events")):
            spoiled = _spoil(json.loads(meta), SURROGATE, keep)
            db.execute("UPDATE events SET metadata = ? WHERE id = ?", (json.dumps(spoiled), id_))
    return path
