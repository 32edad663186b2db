"""Write a copy of a capture fit for a public issue (``dynscope share``).

Every event is copied with its id, time, name and compile id (views find stages by them); what
it says is rewritten: source text becomes ``<source:HASH>`` (dynscope.share.sources), absolute
paths become tree-relative, ``<site-packages>/…``, ``<stdlib>/…`` or ``<path:HASH>``
(dynscope.share.paths), user and host names and secrets ``<user>``, ``<host>``, ``<secret>``
(dynscope.share.identity), string values in guards ``'<value:HASH>'`` (dynscope.share.guard_values,
unless ``--keep-guard-values``), the recorded command line, argv and environment are emptied, and the
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
from dynscope.share.guard_values import GuardValueScrubber
from dynscope.share.identity import IdentityScrubber, is_tree, local_names, users_in
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
# Metadata fields that hold the repr of a value a guard saw (dynscope:guard_failure's ``actual``).
GUARD_VALUE_FIELDS = frozenset({"actual", "expected"})
# Metadata fields that hold a command line or an environment: emptied, whatever they hold.
COMMAND_FIELDS = frozenset({"argv", "command", "cmd", "env", "environ", "environment"})
_COMPRESS_MIN_BYTES = 256

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


@dataclass(frozen=True)
class ShareOptions:
    tree: str | None = None  # the program's tree; default: the recorded working directory
    drop_stages: bool = False
    source_roots: tuple[str, ...] = ()  # where the program's files may be read to learn their lines
    keep_guard_values: bool = False  # string values compared in guards stay as they are


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
    not_a_tree: str | None = None  # the recorded directory, when it is no program's tree (/, a temp folder, a home)
    names: Counter[str] = field(default_factory=Counter)  # "user" | "host" | "secret": words replaced
    guard_values: int = 0  # string values in guards replaced
    size: int = 0


def is_stage_event(name: str) -> bool:
    return (name in STAGE_EVENT_NAMES or name.startswith(contract.LOG_TAP_PREFIX)
            or name.endswith(("_BYTECODE", "_bytecode")) or name == "artifact:fx_graph_runnable")


@dataclass
class Scrubbers:
    """Every rewrite of a text, in the order they run: source lines first (a line that names a path is
    remembered as it was recorded), then paths, then guard values and names."""

    paths: PathMapper
    sources: SourceScrubber
    names: IdentityScrubber
    guards: GuardValueScrubber | None  # None: --keep-guard-values
    _labels: dict[str, str] = field(default_factory=dict)

    def text(self, text: str) -> str:
        text = self.paths.map_text(self.sources.scrub(text))
        if self.guards is not None:
            text = self.guards.scrub(text)
        return self.names.scrub(text)

    def label(self, text: str) -> str:
        """An event's name or compile id: never source, but may name a path or a person (a few
        distinct ones, each rewritten once)."""
        if text not in self._labels:
            self._labels[text] = self.names.scrub(self.paths.map_text(text))
        return self._labels[text]


def share_capture(source: str, output: str, options: ShareOptions = ShareOptions()) -> ShareReport:
    _refuse_same_file(source, output)
    check_capture_target(output)
    salt = os.urandom(16)
    with CaptureReader(source) as reader:
        meta = reader.meta
        tree = options.tree or (meta.get("cwd") if isinstance(meta.get("cwd"), str) else None)
        report = ShareReport(tree=tree)
        if tree is not None and not os.path.isabs(tree):  # a forged relative "cwd" names no place
            report.tree = None
        elif tree is not None and not is_tree(tree):  # / or /tmp: every path would be "inside" it
            report.tree, report.not_a_tree = None, tree
        scrub = Scrubbers(PathMapper(report.tree, salt), SourceScrubber(salt), IdentityScrubber(),
                          None if options.keep_guard_values else GuardValueScrubber(salt))
        events = reader.events()
        _learn(reader, events, meta, scrub, options, report)
        rows, blobs = _rewrite(reader, events, scrub, options, report)
        kept_meta = {key: _scrub_json(meta[key], scrub, report) for key in KEPT_META if key in meta}
        report.meta_removed = sorted(k for k in meta if k not in KEPT_META)
    _write(output, kept_meta, rows, blobs)
    with CaptureReader(output):  # opened as any capture is: our own schema, every check
        pass
    report.events = len(rows)
    report.payloads = len(blobs)
    report.source_lines = scrub.sources.replaced
    report.paths = Counter(_path_kind(shown) for shown in scrub.paths.mapped.values())
    report.names = scrub.names.counts
    report.guard_values = scrub.guards.replaced if scrub.guards is not None else 0
    report.size = os.path.getsize(output)
    return report


# -- pass 1: what is source, what is a path ------------------------------------------------

def _learn(reader: CaptureReader, events: list[Event], meta: dict[str, object], scrub: Scrubbers,
           options: ShareOptions, report: ShareReport) -> None:
    sources = scrub.sources
    found_paths: set[str] = set()
    users: set[str] = set()
    if isinstance(meta.get("cwd"), str):
        found_paths.add(str(meta["cwd"]))
    hosts = [str(meta["hostname"])] if isinstance(meta.get("hostname"), str) else []
    for key in ("cwd", "command", "child_captures"):  # removed from the bundle, but they name the user
        users.update(users_in(json.dumps(meta.get(key))))

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
            users.update(users_in(value))

    for event in events:
        visit(event.metadata, None)
        users.update(users_in(event.name + " " + (event.compile_id or "")))
        if event.payload_hash and not (options.drop_stages and is_stage_event(event.name)):
            payload = reader.payload_record(event.payload_hash, limit=DEFAULT_LIMIT)
            if payload is not None and not payload.truncated:
                sources.find_quoted(payload.text)
                users.update(users_in(payload.text))
    scrub.paths.learn(found_paths)
    local_users, local_hosts = local_names()  # share runs where the capture was made, most often
    scrub.names.learn([*users, *local_users], [*hosts, *local_hosts])
    _read_program_files(found_paths, scrub.paths, sources, options, report)


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


def _rewrite(reader: CaptureReader, events: list[Event], scrub: Scrubbers,
             options: ShareOptions, report: ShareReport) -> tuple[list[_Row], dict[str, str]]:
    rows: list[_Row] = []
    blobs: dict[str, str] = {}
    for event in events:
        metadata = _scrub_json(event.metadata, scrub, report)
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
                    text = _scrub_payload(payload.text, scrub, report)
                    digest = payload_hash(text)
                    blobs[digest] = text
        compile_id = scrub.label(event.compile_id) if event.compile_id is not None else None
        rows.append((event.id, event.ts, scrub.label(event.name), compile_id, event.attempt,
                     json.dumps(metadata, separators=(",", ":")), digest))
    return rows, blobs


def _scrub_payload(text: str, scrub: Scrubbers, report: ShareReport) -> str:
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:  # bounded nesting: a stranger's payload
            value = json_text.loads(text, "payload")
        except CaptureError:
            value = None
        if isinstance(value, dict | list):
            return json.dumps(_scrub_json(value, scrub, report), separators=(",", ":"))
    return scrub.text(text)


def _scrub_json(value: object, scrub: Scrubbers, report: ShareReport, key: str | None = None) -> JsonValue:
    if isinstance(value, dict):
        return {scrub.text(str(k)): _scrub_json(v, scrub, report, str(k)) for k, v in value.items()}
    if key in COMMAND_FIELDS and value:
        report.fields_emptied[key] += 1
        return [] if isinstance(value, list) else {} if isinstance(value, dict) else ""
    if isinstance(value, list):
        return [_scrub_json(v, scrub, report, key) for v in value]
    if isinstance(value, str):
        if key in SOURCE_FIELDS and value.strip():
            report.fields_emptied[key] += 1
            return scrub.sources.drop_field(value)
        if key in GUARD_VALUE_FIELDS and scrub.guards is not None:
            return scrub.text(scrub.guards.literal(value))
        return scrub.text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return scrub.text(str(value))


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

