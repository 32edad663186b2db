"""What a shared bundle must not hold, found independently of dynscope.share (tests/unit/test_share.py,
tests/integration/test_models.py): the program's source lines and the original's absolute paths,
looked for in the raw SQLite bytes and in every row and payload, inflated as the store compresses them."""

from __future__ import annotations

import json
import re
import sqlite3
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

# Any absolute POSIX path of two or more components; "<site-packages>/torch/x.py" is the bundle's
# own name for a path and is not one.
ABSOLUTE = re.compile(r"(?<![\w.~/>-])/[\w.+@%~-]+(?:/[\w.+@%~-]+)+")
IMPORT = re.compile(r"(import\s+[\w.]+(\s+as\s+\w+)?|from\s+[\w.]+\s+import\s+[\w., ()*]+)")


def stored_texts(path: Path) -> Iterator[str]:
    """Everything a capture says: meta, event rows and payloads, inflated the way the store
    compresses them (zlib, or raw under 256 bytes)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        for key, value in db.execute("SELECT key, value FROM meta"):
            yield key + "\n" + value
        for name, compile_id, metadata in db.execute("SELECT name, compile_id, metadata FROM events"):
            yield f"{name}\n{compile_id}\n{metadata}"
        for codec, data in db.execute("SELECT codec, data FROM blobs"):
            assert codec in ("zlib", "raw")
            yield (zlib.decompress(data) if codec == "zlib" else bytes(data)).decode("utf-8")
    finally:
        db.close()


def _source_fields(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("loc", "code") and isinstance(item, str):
                yield item
            else:
                yield from _source_fields(item)
    elif isinstance(value, list):
        for item in value:
            yield from _source_fields(item)


def secrets_of(original: Path, programs: Iterable[Path]) -> tuple[set[str], set[str]]:
    """(source lines, absolute paths) of the original capture: the lines of the program's files
    and every frame's source field; every absolute path, and its first two components."""
    lines = {line.strip() for program in programs for line in program.read_text().splitlines()}
    paths: set[str] = set()
    for text in stored_texts(original):
        paths.update(ABSOLUTE.findall(text))
        for json_text in (text.partition("\n")[2].partition("\n")[2], text):
            if json_text.startswith(("{", "[")):
                try:
                    lines.update(s.strip() for s in _source_fields(json.loads(json_text)))
                except ValueError:
                    pass
    paths |= {"/".join(p.split("/")[:3]) for p in paths}  # its first two components: nothing under them may remain
    # torch's shortened forms in guard comments ("wt/versions/m.py:3", "ork/wt/versions/m.py:3"
    # when it cuts one character too many) say where the file was as much as the path does.
    paths |= {tail for p in list(paths) if p.count("/") >= 3 for tail in (p.split("/", 2)[2], p[2:])}
    lines = {line for line in lines if len(line) >= 10 and not IMPORT.fullmatch(line)}
    return lines, paths


def leaks(bundle: Path, lines: set[str], paths: set[str]) -> list[str]:
    """Each source line and absolute path found in the bundle, and where."""
    raw = bundle.read_bytes()
    texts = list(stored_texts(bundle))
    found = []
    for line in lines:
        for form in {line, json.dumps(line)[1:-1]}:  # as text, and as it is written inside JSON
            if form.encode() in raw or any(form in text for text in texts):
                found.append(f"source line {line!r}")
    for path in paths:
        if path.encode() in raw or any(path in text for text in texts):
            found.append(f"absolute path {path!r}")
    found += [f"absolute path {m!r}" for text in texts for m in ABSOLUTE.findall(text)]
    return found
