"""``dynscope import``: TORCH_TRACE logs into captures, one per rank.

A TORCH_TRACE log is what torch's ``torch.__trace`` logger writes to disk: per event one
glog-style line ``V1123 22:29:31.219000 6165 torch/_dynamo/x.py:123] {metadata JSON}``,
then the payload, one tab-indented line per payload line. We read it as a stream of bytes
(plain or gzip, in chunks) and hand each (metadata, payload) to ``record_trace_event`` — the
same function the live probe calls — so an imported run is stored exactly like an explained one.

A log may come from anyone, so reading it is bounded: an event (its line and its payload
lines) longer than ``MAX_EVENT_BYTES`` is skipped and counted as it streams past, never held
whole (a 1 MB gzip can hold a 1 GiB line), and so is one whose event line (the JSON parsed)
is longer than ``MAX_METADATA_BYTES``; only regular files are read (a FIFO or device in
a log directory is skipped with a note, one named on the command line is refused).

What a log cannot hold (dynscope's own probes: structural FX graphs, structured graph
breaks, guard-failure details, the bytecode and scheduler-IR logs) is marked missing in the
capture's ``probes``/``probe_details``, with the reason. Unreadable lines (a truncated last
line, a damaged one) and event kinds we do not know are counted and kept in the capture's
``imported`` meta, never fatal. Torch-free.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import stat
import time
import zlib
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

from dynscope import events
from dynscope._version import __version__
from dynscope.errors import DynscopeError
from dynscope.events import ImportEnd
from dynscope.store.lock import exclusive_writer, file_kind
from dynscope.store.writer import CaptureWriter, check_capture_target
from dynscope.trace_events import event_name, record_trace_event

LOG_PREFIX = "dedicated_log_torch_trace_"
_RANK_IN_NAME = re.compile(r"dedicated_log_torch_trace_rank_(\d+)_")
# glog prefix: level, MMDD HH:MM:SS.micro, pid, path:line] then the JSON (trace lines have no rank prefix,
# but torch's plain logs do; accept it).
_HEADER = re.compile(r"(?:\[rank\d+\]:)?[VIWEC](\d{4} \d\d:\d\d:\d\d)\.(\d{6}) +(\d+) [^\]]*\] ")

# What dynscope's own probes add and a TORCH_TRACE log cannot hold: marked missing, with why.
MISSING_IN_LOG = {
    "fx_graphs": "not in a TORCH_TRACE log: structural FX graphs come from dynscope's probe (the log has the printed graph)",
    "graph_breaks": "from the log's dynamo_graph_break_reason text: torch does not log gb_type or the live exception",
    "guard_failures": "not in a TORCH_TRACE log: torch logs the recompile reason text only",
    "log:bytecode": "not in a TORCH_TRACE log: torch writes the bytecode artifact log elsewhere",
    "log:ir_pre_fusion": "not in a TORCH_TRACE log: torch writes the scheduler IR artifact log elsewhere",
    "log:ir_post_fusion": "not in a TORCH_TRACE log: torch writes the scheduler IR artifact log elsewhere",
}

_MAX_EXAMPLES = 5

# The largest event (its header line and payload lines) read into memory. Torch's largest
# payloads (Inductor's output code of a big model) are a few MB to tens of MB; a view keeps at
# most 32 MB of one anyway (store.payloads.DEFAULT_LIMIT). Parsing and storing one event holds
# about four copies of it, so this bounds an import's memory to a few hundred MB whatever a
# log holds. A bigger event is skipped and counted.
MAX_EVENT_BYTES = 64 * 1024 * 1024
# The largest event line (its metadata JSON) parsed. Torch's largest, compilation_metrics with
# its config dumps, is about 40 KB; JSON such as `[{},{},...]` takes ~25x its size in Python
# objects (a 60 MB line took 1.9 GB), so this one is bounded much tighter than the event.
MAX_METADATA_BYTES = 1024 * 1024


@dataclass
class ImportStats:
    """What an import read, and what it could not."""

    files: list[str] = field(default_factory=list)
    lines: int = 0
    events: int = 0
    bad_lines: int = 0
    bad_examples: list[str] = field(default_factory=list)  # "file:line: why"
    payload_mismatches: int = 0  # payload shorter/different than torch's md5 says (a truncated log)
    unknown_events: dict[str, int] = field(default_factory=dict)
    oversized_events: int = 0  # events over MAX_EVENT_BYTES: skipped
    skipped_files: list[str] = field(default_factory=list)  # "path: why" (FIFOs, devices in a directory)

    def bad(self, where: str, why: str) -> None:
        self.bad_lines += 1
        self._example(where, why)

    def oversized(self, where: str, size: int, limit: int, what: str = "event") -> None:
        self.oversized_events += 1
        self._example(where, f"an {what} of {size:,} bytes, over the {_size_text(limit)} limit: skipped")

    def _example(self, where: str, why: str) -> None:
        if len(self.bad_examples) < _MAX_EXAMPLES:
            self.bad_examples.append(f"{where}: {why}")

    def as_meta(self) -> dict[str, Any]:
        return self.record().to_metadata()

    def record(self) -> ImportEnd:
        return ImportEnd(files=tuple(self.files), lines=self.lines, events=self.events,
                                bad_lines=self.bad_lines, bad_examples=tuple(self.bad_examples),
                                payload_mismatches=self.payload_mismatches, unknown_events=dict(self.unknown_events),
                                oversized_events=self.oversized_events, skipped_files=tuple(self.skipped_files))


@dataclass(frozen=True)
class TraceRecord:
    metadata: dict[str, Any]
    payload: str | None
    ts: float | None
    pid: int | None
    line: int  # where the event starts in its file (1-based)


class _Clock:
    """glog stamps have no year: take it from the log file's mtime. Seconds are cached per stamp."""

    def __init__(self, year: int) -> None:
        self.year = year
        self._cache: dict[str, float] = {}

    def __call__(self, stamp: str, micros: str) -> float | None:
        base = self._cache.get(stamp)
        if base is None:
            try:
                base = time.mktime(time.strptime(f"{self.year}{stamp}", "%Y%m%d %H:%M:%S"))
            except ValueError:
                return None
            self._cache[stamp] = base
        return base + int(micros) / 1e6


_BOUNDARY = re.compile(rb"\n(?=[^\t])")  # an event starts on every line that is not a payload line
_CHUNK_BYTES = 1 << 22
_GZIP_CHUNK_BYTES = 1 << 16  # small reads for gzip: a read that meets a cut loses what it had decompressed


@dataclass(frozen=True)
class Oversized:
    """An event longer than the limit, skipped: how big it was and how many lines it spanned."""

    size: int
    lines: int


class _Pending:
    """The event being read, in pieces; once it outgrows the limit only its size is kept."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.over = False
        self.newlines = 0  # counted only once over: the block is not kept to count them later

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.over:
            self.newlines += piece.count(b"\n")
        elif self.size > self.limit:
            self.over = True
            self.newlines = sum(p.count(b"\n") for p in self.parts) + piece.count(b"\n")
            self.parts = []
        else:
            self.parts.append(piece)

    def drop_last_newline(self) -> None:
        """The previous chunk ended with the newline that separates this event from the next."""
        self.size -= 1
        if self.over:
            self.newlines -= 1
        else:
            self.parts[-1] = self.parts[-1][:-1]

    def take(self) -> bytes | Oversized:
        taken: bytes | Oversized = Oversized(self.size, self.newlines + 1) if self.over else b"".join(self.parts)
        self.parts, self.size, self.over, self.newlines = [], 0, False, 0
        return taken


def _event_blocks(chunks: Iterable[bytes], limit: int = MAX_EVENT_BYTES) -> Iterator[tuple[int, bytes | Oversized]]:
    """(first line number, bytes) of each event: its header line and its tab-indented payload lines,
    or Oversized for an event longer than ``limit`` bytes.

    Works on chunks of any size (whole lines, or 4 MB reads): memory is bounded by the chunk
    plus ``limit``, and the per-line work happens in C (regex, count, join)."""
    pending = _Pending(limit)
    line, ended_in_newline = 1, False
    for chunk in chunks:
        if not chunk:
            continue
        # A boundary may straddle two chunks: the previous one ended in "\n", this one starts an event.
        offset = 1 if ended_in_newline else 0
        start = 0
        for match in _BOUNDARY.finditer((b"\n" if ended_in_newline else b"") + chunk):
            cut = match.start() - offset
            if cut >= 0:
                pending.add(chunk[start:cut])
            else:
                pending.drop_last_newline()
            block = pending.take()
            yield line, block
            line += (block.lines if isinstance(block, Oversized) else block.count(b"\n") + 1)
            start = cut + 1
        if start < len(chunk):
            pending.add(chunk[start:])
        ended_in_newline = chunk.endswith(b"\n")
    if pending.size:
        if ended_in_newline:
            pending.drop_last_newline()
        block = pending.take()
        if isinstance(block, Oversized) or block:
            yield line, block


def parse_trace_lines(chunks: Iterable[bytes | str], stats: ImportStats, *, where: str = "log",
                      year: int | None = None, limit: int = MAX_EVENT_BYTES) -> Iterator[TraceRecord]:
    """Structured-trace records from the bytes of one TORCH_TRACE log, given as lines or chunks
    (bytes, or text: encoded as UTF-8) (pure: no I/O, no torch). Bytes that are not UTF-8 are
    read as U+FFFD (a damaged payload then fails torch's md5 and is counted)."""
    clock = _Clock(year or time.localtime().tm_year)
    as_bytes = (c.encode("utf-8", "surrogatepass") if isinstance(c, str) else c for c in chunks)
    for number, block in _event_blocks(as_bytes, limit):
        if isinstance(block, Oversized):
            stats.lines += block.lines
            stats.oversized(f"{where}:{number}", block.size, limit)
            continue
        head_bytes, newline, rest = block.partition(b"\n")
        stats.lines += 1 + block.count(b"\n")
        if not head_bytes:
            continue
        if head_bytes.startswith(b"\t"):
            stats.bad(f"{where}:{number}", "payload line without an event")
            continue
        if len(head_bytes) > MAX_METADATA_BYTES:
            stats.oversized(f"{where}:{number}", len(head_bytes), MAX_METADATA_BYTES, "event line")
            continue
        head = head_bytes.decode("utf-8", "replace")
        match = _HEADER.match(head)
        if match is None:
            stats.bad(f"{where}:{number}", "not a structured-trace line")
            continue
        try:
            metadata = json.loads(head[match.end():])
        except ValueError:
            stats.bad(f"{where}:{number}", "unreadable JSON (truncated line?)")
            continue
        except RecursionError:
            stats.bad(f"{where}:{number}", "JSON nested too deeply")
            continue
        if not isinstance(metadata, dict) or not metadata:
            stats.bad(f"{where}:{number}", "event is not a JSON object")
            continue
        raw = rest[1:].replace(b"\n\t", b"\n") if rest else (b"" if "has_payload" in metadata else None)
        del rest
        expected = metadata.get("has_payload")
        if isinstance(expected, str) and raw is not None and \
                hashlib.md5(raw, usedforsecurity=False).hexdigest() != expected:
            stats.payload_mismatches += 1
        payload = raw.decode("utf-8", "replace") if raw is not None else None
        del raw
        yield TraceRecord(metadata, payload, clock(match.group(1), match.group(2)), int(match.group(3)), number)


class NotALogFile(Exception):
    """A path that is not a regular file (a FIFO, a device): never opened for reading."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def _regular_kind(path: str) -> str | None:
    """None for a regular file (through symlinks); else what it is, for the message."""
    mode = os.stat(path).st_mode
    return None if stat.S_ISREG(mode) else file_kind(mode)


@contextmanager
def _open_log(path: str) -> Iterator[IO[bytes] | gzip.GzipFile]:
    """The log's bytes, gunzipped if need be. Only a regular file is opened, and the file
    opened is checked again (a FIFO swapped in after the check would block a plain open)."""
    kind = _regular_kind(path)
    if kind is not None:
        raise NotALogFile(kind)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as raw:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotALogFile(file_kind(os.fstat(fd).st_mode))
        os.set_blocking(fd, True)
        gzipped = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        if gzipped:
            with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                yield unzipped
        else:
            yield raw


def _read_chunks(stream: IO[bytes] | gzip.GzipFile, stats: ImportStats, where: str) -> Iterator[bytes]:
    """The file's bytes in chunks; a gzip cut short ends it, keeping everything before the cut."""
    size = _GZIP_CHUNK_BYTES if isinstance(stream, gzip.GzipFile) else _CHUNK_BYTES
    while True:
        try:
            chunk = stream.read(size)
        except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
            stats.bad(where, f"stopped reading: {e}")
            return
        if not chunk:
            return
        yield chunk


def find_logs(paths: list[str]) -> tuple[list[str], list[str]]:
    """The log files named, or found (recursively) in the directories named, in a stable order;
    and what was skipped in those directories ("path: why": FIFOs, devices, dangling links).
    A path named on the command line that is not a regular file or directory is refused."""
    found: list[str] = []
    skipped: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            inside = sorted(
                os.path.join(root, name) for root, _, names in os.walk(path) for name in names
                if name.startswith(LOG_PREFIX) or name.endswith((".log", ".log.gz"))
            )
            if not inside:
                raise DynscopeError(f"no TORCH_TRACE logs ({LOG_PREFIX}*.log) in {path}")
            for name in inside:
                try:
                    kind = _regular_kind(name)
                except OSError as e:
                    kind = f"unreadable ({e.strerror})"
                if kind is None:
                    found.append(name)
                else:
                    skipped.append(f"{name}: {kind}, skipped")
            if not found:
                raise DynscopeError(f"no readable TORCH_TRACE logs in {path}: {skipped[0]}")
        elif os.path.lexists(path):
            try:
                kind = _regular_kind(path)
            except OSError as e:
                raise DynscopeError(f"cannot read {path}: {e.strerror}") from None
            if kind is not None:
                raise DynscopeError(f"cannot read {path}: it is {kind}, not a log file")
            found.append(path)
        else:
            raise DynscopeError(f"no such file or directory: {path}")
    return found, skipped


def rank_of_file(path: str) -> int | None:
    """From torch's file name; else from the ``rank`` torch puts in every event once a process
    group exists (a renamed log)."""
    match = _RANK_IN_NAME.search(os.path.basename(path))
    if match:
        return int(match.group(1))
    try:
        with _open_log(path) as stream:
            head = stream.read(1 << 18)
    except (OSError, EOFError, zlib.error, NotALogFile):
        return None
    for record in parse_trace_lines([head], ImportStats()):
        rank = record.metadata.get("rank")
        if isinstance(rank, int) and not isinstance(rank, bool):
            return rank
    return None


def output_paths(out: str, keys: list[int | None]) -> dict[int | None, str]:
    """One capture per rank: OUT itself for a single one, OUT.rankN.dynscope for several."""
    if len(keys) == 1:
        return {keys[0]: out}
    stem = out[: -len(".dynscope")] if out.endswith(".dynscope") else out
    return {k: f"{stem}.rank{k}.dynscope" if k is not None else f"{stem}.unranked.dynscope" for k in keys}


@dataclass(frozen=True)
class Imported:
    path: str
    rank: int | None
    stats: ImportStats


def import_logs(paths: list[str], out: str) -> list[Imported]:
    """Import TORCH_TRACE logs into one capture per rank; returns what each capture holds."""
    files, skipped = find_logs(paths)
    by_rank: dict[int | None, list[str]] = {}
    for path in files:
        by_rank.setdefault(rank_of_file(path), []).append(path)
    if None in by_rank and len(by_rank) > 1:
        unranked = ", ".join(by_rank[None][:3])
        raise DynscopeError(f"cannot tell the rank of {unranked}: import ranked and unranked logs separately")
    targets = output_paths(out, sorted(by_rank, key=lambda r: -1 if r is None else r))
    with ExitStack() as locks:
        # Every output is refused or locked before any is written: `explain` may be writing one.
        for target in targets.values():
            check_capture_target(target)
            locks.enter_context(exclusive_writer(os.path.abspath(target)))
        return [_import_rank(rank, by_rank[rank], target, skipped) for rank, target in targets.items()]


def _import_rank(rank: int | None, files: list[str], out: str, skipped: list[str]) -> Imported:
    stats = ImportStats(files=[os.path.abspath(f) for f in files], skipped_files=list(skipped))
    writer = CaptureWriter(out, bulk=True)
    try:
        writer.set_meta(dynscope_version=__version__, torch_version=None, command=[], cwd=None,
                        rank=rank, world_size=None, keep_caches=True,
                        probes={"trace": True, **{name: False for name in MISSING_IN_LOG}},
                        probe_details=dict(MISSING_IN_LOG))
        first_ts = last_ts = None
        pids: set[int] = set()
        torch_version = None
        events.write(writer, events.ImportStart(files=tuple(stats.files)))
        for path in files:
            if writer.cut:
                break
            with ExitStack() as opened:
                try:
                    year = time.localtime(os.path.getmtime(path)).tm_year
                    stream = opened.enter_context(_open_log(path))
                except NotALogFile as e:  # replaced by a FIFO or device since it was listed
                    stats.skipped_files.append(f"{path}: {e.kind}, skipped")
                    continue
                except OSError as e:
                    raise DynscopeError(f"cannot read {path}: {e.strerror or e}") from None
                chunks = _read_chunks(stream, stats, os.path.basename(path))
                for record in parse_trace_lines(chunks, stats, where=os.path.basename(path), year=year):
                    name = event_name(record.metadata)
                    if not events.is_torch_event(name):
                        stats.unknown_events[name] = stats.unknown_events.get(name, 0) + 1
                    record_trace_event(writer, record.metadata, record.payload, record.ts)
                    if writer.cut:  # a write failed (a full disk): nothing more can be stored
                        break
                    if torch_version is None and name == "compilation_metrics":
                        metrics = record.metadata.get("compilation_metrics")
                        torch_version = metrics.get("pytorch_version") if isinstance(metrics, dict) else None
                    stats.events += 1
                    if record.ts is not None:
                        first_ts = record.ts if first_ts is None else first_ts
                        last_ts = record.ts
                    if record.pid is not None:
                        pids.add(record.pid)
        writer.set_meta(imported=stats.as_meta(), started=first_ts, finished=last_ts,
                        pid=next(iter(pids)) if len(pids) == 1 else None, torch_version=torch_version)
        events.write(writer, stats.record(), ts=last_ts)
    except BaseException as e:
        writer.close(incomplete=f"the import stopped early ({type(e).__name__})")
        raise
    writer.close()
    if writer.cut:
        raise DynscopeError(f"stopped importing into {out}: {writer.cut}; the capture keeps what was written "
                            "before and says it is incomplete")
    if stats.events == 0:
        os.remove(out)
        why = f" (first unreadable line: {stats.bad_examples[0]})" if stats.bad_examples else ""
        raise DynscopeError(f"no structured-trace events in {', '.join(files)}: is it a TORCH_TRACE log?{why}")
    return Imported(out, rank, stats)


def _size_text(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n:,} bytes"
