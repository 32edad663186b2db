"""What a run has compiled so far, read from its capture while the recording child writes it.

The capture is the honest source and the cheapest one: the child already writes every compile and
graph break into it as they happen (WAL, small transactions), and a reader never blocks the writer.
Each read asks only for the events added since the last (two names, by index), on a read-only
connection opened for that read. Only counts are read, never a payload.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass

from dynscope import events as contract
from dynscope.store.schema import FILE_SUFFIX

_COMPILE_START = "dynamo_start"  # torch's structured-trace event: one per compile (frame/compile)
_BREAK = contract.GraphBreakSeen.KIND  # dynscope's probe
_BREAK_ARTIFACT = "artifact:dynamo_graph_break_reason"  # torch's own: where the probe is missing (torch 2.6)
_NAMES = (_COMPILE_START, _BREAK, _BREAK_ARTIFACT)


@dataclass(frozen=True)
class Counts:
    frames: int  # distinct frames compiled
    breaks: int  # graph breaks
    recompiles: int  # compiles of a frame after its first

    def words(self) -> str:
        return (f"{self.frames} frame{'s' if self.frames != 1 else ''} compiled · "
                f"{self.breaks} break{'s' if self.breaks != 1 else ''} · "
                f"{self.recompiles} recompile{'s' if self.recompiles != 1 else ''}")


class CaptureCounter:
    """Counts of one capture, read incrementally (``read`` again after more was written)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._last_id = 0
        self._frames: set[str] = set()
        self._breaks = 0
        self._logged_breaks = 0
        self._recompiles = 0

    def read(self) -> Counts | None:
        """The counts so far; None while there is no capture to read yet (or it cannot be read now)."""
        if not os.path.isfile(self.path):
            return None
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=0.2)
        except sqlite3.Error:
            return None
        try:
            rows = db.execute(f"SELECT id, name, compile_id FROM events WHERE id > ? AND name IN ({_marks(_NAMES)}) "
                              "ORDER BY id", (self._last_id, *_NAMES)).fetchall()
        except sqlite3.Error:  # not created yet (the child is setting it up), or busy: next time
            return self.counts() if self._last_id else None
        finally:
            db.close()
        for id_, name, compile_id in rows:
            self._last_id = id_
            if name == _BREAK:
                self._breaks += 1
                continue
            if name == _BREAK_ARTIFACT:
                self._logged_breaks += 1
                continue
            frame, index = _frame_and_index(compile_id)
            if frame is None:
                continue
            self._frames.add(frame)
            if index:
                self._recompiles += 1
        return self.counts()

    def counts(self) -> Counts:
        # as the model reads them: the probe's records, else (no probe on this torch) torch's artifact
        return Counts(len(self._frames), self._breaks or self._logged_breaks, self._recompiles)


class NewestCapture:
    """The counts of the capture most recently started in a directory (the run in progress, where
    a tool such as ``fix`` writes one capture per run)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._counter: CaptureCounter | None = None

    def read(self) -> Counts | None:
        newest = _newest_capture(self.directory)
        if newest is None:
            return None
        if self._counter is None or self._counter.path != newest:
            self._counter = CaptureCounter(newest)
        return self._counter.read()


def _newest_capture(directory: str) -> str | None:
    try:
        entries = [e for e in os.scandir(directory) if e.name.endswith(FILE_SUFFIX) and e.is_file()]
    except OSError:
        return None
    if not entries:
        return None
    return max(entries, key=lambda e: e.stat().st_ctime).path


def _frame_and_index(compile_id: object) -> tuple[str | None, int]:
    """``"3/1"`` -> ("3", 1); compiled autograd's ``"!ca/0/3/1"`` keeps its prefix in the frame."""
    if not isinstance(compile_id, str) or "/" not in compile_id:
        return None, 0
    frame, _, index = compile_id.rpartition("/")
    try:
        return frame, int(index.split("_", 1)[0])
    except ValueError:
        return frame, 0


def _marks(values: tuple[str, ...]) -> str:
    return ", ".join("?" for _ in values)
