"""``dynscope import``: TORCH_TRACE logs into captures, one per rank.

A TORCH_TRACE log is what torch's ``torch.__trace`` logger writes to disk: per event one
glog-style line ``V1123 22:29:31.219000 6165 torch/_dynamo/x.py:123] {metadata JSON}``,
then the payload, one tab-indented line per payload line. We read it as a stream (plain or
gzip, line by line: memory stays bounded by the largest single payload) and hand each
(metadata, payload) to ``record_trace_event`` — the same function the live probe calls —
so an imported run is stored exactly like an explained one.

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
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from dynscope import events
from dynscope._version import __version__
from dynscope.errors import DynscopeError
from dynscope.store.writer import CaptureWriter
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

    def bad(self, where: str, why: str) -> None:
        self.bad_lines += 1
        if len(self.bad_examples) < _MAX_EXAMPLES:
            self.bad_examples.append(f"{where}: {why}")

    def as_meta(self) -> dict[str, Any]:
        return self.record().to_metadata()

    def record(self) -> events.ImportEnd:
        return events.ImportEnd(files=tuple(self.files), lines=self.lines, events=self.events,
                                bad_lines=self.bad_lines, bad_examples=tuple(self.bad_examples),
                                payload_mismatches=self.payload_mismatches, unknown_events=dict(self.unknown_events))


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


_BOUNDARY = re.compile(r"\n(?=[^\t])")  # an event starts on every line that is not a payload line
_CHUNK_CHARS = 1 << 22


def _event_blocks(chunks: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each event: its header line and its tab-indented payload lines.

    Works on chunks of any size (whole lines, or 4 MB reads): memory is bounded by the chunk
    plus the largest single event, and the per-line work happens in C (regex, count, replace)."""
    parts: list[str] = []  # the event not yet complete, in pieces (no quadratic re-joining of a huge payload)
    line, ended_in_newline = 1, False
    for chunk in chunks:
        if not chunk:
            continue
        # A boundary may straddle two chunks: the previous one ended in "\n", this one starts an event.
        offset = 1 if ended_in_newline else 0
        start = 0
        for match in _BOUNDARY.finditer(("\n" if ended_in_newline else "") + chunk):
            cut = match.start() - offset
            if cut >= 0:
                parts.append(chunk[start:cut])
            else:
                parts[-1] = parts[-1][:-1]
            block = "".join(parts)
            parts = []
            yield line, block
            line += block.count("\n") + 1
            start = cut + 1
        if start < len(chunk):
            parts.append(chunk[start:])
        ended_in_newline = chunk.endswith("\n")
    block = "".join(parts)
    if block.endswith("\n"):
        block = block[:-1]
    if block:
        yield line, block


def parse_trace_lines(chunks: Iterable[str], stats: ImportStats, *, where: str = "log",
                      year: int | None = None) -> Iterator[TraceRecord]:
    """Structured-trace records from the text of one TORCH_TRACE log, given as lines or chunks
    (pure: no I/O, no torch)."""
    clock = _Clock(year or time.localtime().tm_year)
    for number, block in _event_blocks(chunks):
        head, newline, rest = block.partition("\n")
        stats.lines += 1 + block.count("\n")
        if not head:
            continue
        if head.startswith("\t"):
            stats.bad(f"{where}:{number}", "payload line without an event")
            continue
        match = _HEADER.match(head)
        if match is None:
            stats.bad(f"{where}:{number}", "not a structured-trace line")
            continue
        try:
            metadata = json.loads(head[match.end():])
        except ValueError:
            stats.bad(f"{where}:{number}", "unreadable JSON (truncated line?)")
            continue
        if not isinstance(metadata, dict) or not metadata:
            stats.bad(f"{where}:{number}", "event is not a JSON object")
            continue
        payload = rest[1:].replace("\n\t", "\n") if rest else ("" if "has_payload" in metadata else None)
        expected = metadata.get("has_payload")
        if isinstance(expected, str) and payload is not None and \
                hashlib.md5(payload.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest() != expected:
            stats.payload_mismatches += 1
        yield TraceRecord(metadata, payload, clock(match.group(1), match.group(2)), int(match.group(3)), number)


def _open_text(path: str) -> IO[str]:
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    if gzipped:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="\n")
    return open(path, encoding="utf-8", errors="replace", newline="\n")


def _read_chunks(stream: IO[str], stats: ImportStats, where: str) -> Iterator[str]:
    """The file's text in chunks; a gzip cut short ends it, keeping everything before the cut."""
    # Small reads for gzip: a read that meets the cut loses what it had decompressed.
    size = 1 << 16 if isinstance(getattr(stream, "buffer", None), gzip.GzipFile) else _CHUNK_CHARS
    while True:
        try:
            chunk = stream.read(size)
        except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
            stats.bad(where, f"stopped reading: {e}")
            return
        if not chunk:
            return
        yield chunk


def find_logs(paths: list[str]) -> list[str]:
    """The log files named, or found (recursively) in the directories named, in a stable order."""
    found: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            inside = sorted(
                os.path.join(root, name) for root, _, names in os.walk(path) for name in names
                if name.startswith(LOG_PREFIX) or name.endswith((".log", ".log.gz"))
            )
            if not inside:
                raise DynscopeError(f"no TORCH_TRACE logs ({LOG_PREFIX}*.log) in {path}")
            found += inside
        elif os.path.isfile(path):
            found.append(path)
        else:
            raise DynscopeError(f"no such file or directory: {path}")
    return found


def rank_of_file(path: str) -> int | None:
    """From torch's file name; else from the ``rank`` torch puts in every event once a process
    group exists (a renamed log)."""
    match = _RANK_IN_NAME.search(os.path.basename(path))
    if match:
        return int(match.group(1))
    try:
        with _open_text(path) as stream:
            head = stream.read(1 << 18)
    except (OSError, EOFError):
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
    files = find_logs(paths)
    by_rank: dict[int | None, list[str]] = {}
    for path in files:
        by_rank.setdefault(rank_of_file(path), []).append(path)
    if None in by_rank and len(by_rank) > 1:
        unranked = ", ".join(by_rank[None][:3])
        raise DynscopeError(f"cannot tell the rank of {unranked}: import ranked and unranked logs separately")
    targets = output_paths(out, sorted(by_rank, key=lambda r: -1 if r is None else r))
    return [_import_rank(rank, by_rank[rank], target) for rank, target in targets.items()]


def _import_rank(rank: int | None, files: list[str], out: str) -> Imported:
    stats = ImportStats(files=[os.path.abspath(f) for f in files])
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
            try:
                year = time.localtime(os.path.getmtime(path)).tm_year
                opened = _open_text(path)
            except OSError as e:
                raise DynscopeError(f"cannot read {path}: {e.strerror or e}") from None
            with opened as stream:
                chunks = _read_chunks(stream, stats, os.path.basename(path))
                for record in parse_trace_lines(chunks, stats, where=os.path.basename(path), year=year):
                    name = event_name(record.metadata)
                    if not events.is_torch_event(name):
                        stats.unknown_events[name] = stats.unknown_events.get(name, 0) + 1
                    record_trace_event(writer, record.metadata, record.payload, record.ts)
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
    finally:
        writer.close()
    if stats.events == 0:
        os.remove(out)
        why = f" (first unreadable line: {stats.bad_examples[0]})" if stats.bad_examples else ""
        raise DynscopeError(f"no structured-trace events in {', '.join(files)}: is it a TORCH_TRACE log?{why}")
    return Imported(out, rank, stats)
