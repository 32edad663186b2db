"""Write a copy of a capture fit for a public issue (``dynscope share``).

Every event is copied with its id, time, name and compile id (views find stages by them); what
it says is rewritten: source text becomes ``<source:HASH>`` (dynscope.share.sources), absolute
paths become tree-relative, ``<site-packages>/…``, ``<stdlib>/…`` or ``<path:HASH>``
(dynscope.share.paths), the recorded command line, argv and environment are emptied, and the
run's meta keeps only an allow-list of keys (versions, platform, times, exit status, probes):
hostname, pid, working directory and command are gone. JSON payloads are rewritten as JSON,
string by string. ``--drop-stages`` drops the stage payloads (graphs, kernels, bytecode, IR),
keeping their events, so a view says the stage's text is missing rather than that torch never
emitted it.

The copy is written fresh (nothing deleted from the original can linger in a free page) and
checked by opening it as a stranger's capture is opened.
"""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from collections import Counter
from dataclasses import dataclass, field

from dynscope import events as contract
from dynscope.analysis.source import SourceAccess, reader_roots
from dynscope.errors import CaptureError, DynscopeError
from dynscope.model.stages import STAGE_EVENT_NAMES
from dynscope.share.paths import PathMapper
from dynscope.share.sources import SourceScrubber
from dynscope.store import json_text
from dynscope.store.payloads import DEFAULT_LIMIT
from dynscope.store.reader import CaptureReader, Event
from dynscope.store.schema import APPLICATION_ID, DDL, SCHEMA_VERSION
from dynscope.store.writer import check_capture_target, payload_hash

# The run's meta a bundle keeps: what a maintainer needs to reproduce, nothing about the machine
# or the person (no hostname, pid, directory, command; child captures name paths and pids).
KEPT_META = ("dynscope_version", "torch_version", "python", "platform", "started", "finished", "rank",
             "world_size", "exit_code", "signal", "keep_caches", "device", "probes", "probe_details",
             "probe_errors", "profiled", "forced_eager", "complete", "incomplete_reason", "imported")
# Metadata fields that hold source (torch's frames: ``loc``; dynscope's: ``code``, and a break
# frame's ``statement`` and neighbouring statements ``above`` and ``below``, each item of their lists).
SOURCE_FIELDS = frozenset({"loc", "code", "statement", "above", "below"})
# Metadata fields that hold a command line or an environment: emptied, whatever they hold.
COMMAND_FIELDS = frozenset({"argv", "command", "cmd", "env", "environ", "environment"})
_COMPRESS_MIN_BYTES = 256

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


@dataclass(frozen=True)
class ShareOptions:
    tree: str | None = None  # the program's tree; default: the recorded working directory
    drop_stages: bool = False
    source_roots: tuple[str, ...] = ()  # where the program's files may be read to learn their lines


@dataclass
class ShareReport:
    events: int = 0
    payloads: int = 0
    stage_payloads_dropped: int = 0
    large_payloads_dropped: int = 0
    source_lines: int = 0
    source_files_read: int = 0
    fields_emptied: Counter[str] = field(default_factory=Counter)
    meta_removed: list[str] = field(default_factory=list)
    paths: Counter[str] = field(default_factory=Counter)  # "relative" | "site-packages" | "stdlib" | "hashed"
    tree: str | None = None
    size: int = 0


def is_stage_event(name: str) -> bool:
    return (name in STAGE_EVENT_NAMES or name.startswith(contract.LOG_TAP_PREFIX)
            or name.endswith(("_BYTECODE", "_bytecode")) or name == "artifact:fx_graph_runnable")


def share_capture(source: str, output: str, options: ShareOptions = ShareOptions()) -> ShareReport:
    _refuse_same_file(source, output)
    check_capture_target(output)
    salt = os.urandom(16)
    with CaptureReader(source) as reader:
        meta = reader.meta
        tree = options.tree or (meta.get("cwd") if isinstance(meta.get("cwd"), str) else None)
        report = ShareReport(tree=tree)
        paths = PathMapper(tree, salt)
        sources = SourceScrubber(salt)
        events = reader.events()
        _learn(reader, events, meta, paths, sources, options, report)
        rows, blobs = _rewrite(reader, events, paths, sources, options, report)
        kept_meta = {key: _scrub_json(meta[key], paths, sources, report) for key in KEPT_META if key in meta}
        report.meta_removed = sorted(k for k in meta if k not in KEPT_META)
    _write(output, kept_meta, rows, blobs)
    with CaptureReader(output):  # opened as any capture is: our own schema, every check
        pass
    report.events = len(rows)
    report.payloads = len(blobs)
    report.source_lines = sources.replaced
    report.paths = Counter(_path_kind(shown) for shown in paths.mapped.values())
    report.size = os.path.getsize(output)
    return report


# -- pass 1: what is source, what is a path ------------------------------------------------

def _learn(reader: CaptureReader, events: list[Event], meta: dict[str, object], paths: PathMapper,
           sources: SourceScrubber, options: ShareOptions, report: ShareReport) -> None:
    found_paths: set[str] = set()
    if isinstance(meta.get("cwd"), str):
        found_paths.add(str(meta["cwd"]))

    def visit(value: object, key: str | None) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                visit(v, k)
        elif isinstance(value, list):
            for v in value:
                visit(v, key)
        elif isinstance(value, str):
            if key in SOURCE_FIELDS:
                sources.remember([value])
            elif "\n" not in value and os.path.isabs(value):
                found_paths.add(value)
            sources.find_quoted(value)

    for event in events:
        visit(event.metadata, None)
        if event.payload_hash and not (options.drop_stages and is_stage_event(event.name)):
            payload = reader.payload_record(event.payload_hash, limit=DEFAULT_LIMIT)
            if payload is not None and not payload.truncated:
                sources.find_quoted(payload.text)
    paths.learn(found_paths)
    _read_program_files(found_paths, paths, sources, options, report)


def _read_program_files(found: set[str], paths: PathMapper, sources: SourceScrubber, options: ShareOptions,
                        report: ShareReport) -> None:
    """Learn every line of the program's own files that this machine may read: at the path the
    capture names, or at the same place relative to the directory share runs in (a checkout of
    the program). Only .py files under the reader's source roots are read (dynscope.analysis.source)."""
    roots = reader_roots(options.source_roots)
    here = SourceAccess(None, roots)
    checkout = SourceAccess(os.getcwd(), roots)
    for path in sorted(found):
        relative = paths.map_path(path)
        if not path.endswith(".py") or relative.startswith("<") or os.path.isabs(relative):
            continue
        for text in (here.whole_text(path), checkout.whole_text(relative)):
            if text is not None:
                report.source_files_read += 1
                sources.remember(text.splitlines())


# -- pass 2: rewrite -----------------------------------------------------------------------

_Row = tuple[int, float, str, str | None, int | None, str, str | None]


def _rewrite(reader: CaptureReader, events: list[Event], paths: PathMapper, sources: SourceScrubber,
             options: ShareOptions, report: ShareReport) -> tuple[list[_Row], dict[str, str]]:
    rows: list[_Row] = []
    blobs: dict[str, str] = {}
    for event in events:
        metadata = _scrub_json(event.metadata, paths, sources, report)
        digest = None
        if event.payload_hash is not None:
            if options.drop_stages and is_stage_event(event.name):
                report.stage_payloads_dropped += 1
            else:
                payload = reader.payload_record(event.payload_hash, limit=DEFAULT_LIMIT)
                if payload is None:
                    pass
                elif payload.truncated:
                    report.large_payloads_dropped += 1  # never read whole: not checked, not shared
                else:
                    text = _scrub_payload(payload.text, paths, sources, report)
                    digest = payload_hash(text)
                    blobs[digest] = text
        rows.append((event.id, event.ts, event.name, event.compile_id, event.attempt,
                     json.dumps(metadata, separators=(",", ":")), digest))
    return rows, blobs


def _scrub_payload(text: str, paths: PathMapper, sources: SourceScrubber, report: ShareReport) -> str:
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:  # bounded nesting: a stranger's payload
            value = json_text.loads(text, "payload")
        except CaptureError:
            value = None
        if isinstance(value, dict | list):
            return json.dumps(_scrub_json(value, paths, sources, report), separators=(",", ":"))
    return _scrub_text(text, paths, sources)


def _scrub_text(text: str, paths: PathMapper, sources: SourceScrubber) -> str:
    # Source first: a line that names a path is remembered as it was recorded.
    return paths.map_text(sources.scrub(text))


def _scrub_json(value: object, paths: PathMapper, sources: SourceScrubber, report: ShareReport,
                key: str | None = None) -> JsonValue:
    if isinstance(value, dict):
        return {_scrub_text(str(k), paths, sources): _scrub_json(v, paths, sources, report, str(k))
                for k, v in value.items()}
    if key in COMMAND_FIELDS and value:
        report.fields_emptied[key] += 1
        return [] if isinstance(value, list) else {} if isinstance(value, dict) else ""
    if isinstance(value, list):
        return [_scrub_json(v, paths, sources, report, key) for v in value]
    if isinstance(value, str):
        if key in SOURCE_FIELDS and value.strip():
            report.fields_emptied[key] += 1
            return sources.drop_field(value)
        return _scrub_text(value, paths, sources)
    if value is None or isinstance(value, bool | int | float):
        return value
    return _scrub_text(str(value), paths, sources)


# -- writing -------------------------------------------------------------------------------

def _write(output: str, meta: dict[str, JsonValue], rows: list[_Row], blobs: dict[str, str]) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.remove(output + suffix)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise DynscopeError(f"cannot write {output}: {e.strerror}") from None
    try:
        db = sqlite3.connect(output, isolation_level=None)
    except sqlite3.Error as e:
        raise DynscopeError(f"cannot write {output}: {e}") from None
    try:
        db.execute(f"PRAGMA application_id={APPLICATION_ID}")
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.executescript(f"BEGIN; {DDL} COMMIT;")
        db.execute("BEGIN")
        db.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                       [(k, json.dumps(v, separators=(",", ":"))) for k, v in meta.items()])
        db.executemany("INSERT INTO blobs(hash, codec, size, data) VALUES (?, ?, ?, ?)",
                       [_blob(digest, text) for digest, text in blobs.items()])
        db.executemany("INSERT INTO events(id, ts, name, compile_id, attempt, metadata, payload)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        db.execute("COMMIT")
        db.execute("VACUUM")
    except sqlite3.Error as e:
        raise DynscopeError(f"cannot write {output}: {e}") from None
    finally:
        db.close()


def _blob(digest: str, text: str) -> tuple[str, str, int, bytes]:
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) < _COMPRESS_MIN_BYTES:
        return digest, "raw", len(raw), raw
    return digest, "zlib", len(raw), zlib.compress(raw, 6)


def _refuse_same_file(source: str, output: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        target = source + suffix
        if os.path.realpath(output) == os.path.realpath(target) or _samefile(output, target):
            raise DynscopeError(f"refusing to write {output}: it is the capture being shared; choose another output")


def _samefile(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _path_kind(shown: str) -> str:
    if shown.startswith("<site-packages>"):
        return "site-packages"
    if shown.startswith("<stdlib>"):
        return "stdlib"
    if shown.startswith("<path:"):
        return "hashed"
    return "relative"

