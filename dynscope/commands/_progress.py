"""Progress on stderr for the commands that run a program (explain, numerics, minify, fix).

On a terminal: one live status line (the phase, frames compiled, breaks and recompiles so far,
elapsed time), kept on the terminal's last row. The program's own output shares that terminal and
is never touched: the rows above the status are made a scrolling region of their own (as apt's
progress bar does), so the program's lines scroll there and never run into the status; each redraw
is one write (save the cursor, draw the last row, restore the cursor), so it cannot split a line the
program is writing; on leaving, the region is reset and the status row cleared. In a pipe or a log:
one line per phase, at most one every few seconds. ``-q``: nothing.

The counts come from the capture the recording child is writing (dynscope/runner/live_counts.py).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from dynscope.runner.live_counts import Counts

PIPE_INTERVAL_S = 3.0  # in a pipe, at most one phase line this often
TICK_S = 0.25  # a terminal's status is redrawn this often (the spinner, the elapsed time)
READ_EVERY_S = 1.0  # the capture is read this often for the counts
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

CountSource = Callable[[], Counts | None]


class Progress:
    """``with Progress(...) as progress: progress.stage("baseline: ...")``; ``counts``: where the
    live counts come from (``CaptureCounter(path).read``, ``NewestCapture(dir).read``), or None;
    ``counts_of`` names whose they are when they are not the one run's (``NewestCapture``)."""

    def __init__(self, command: str, *, stream: TextIO | None = None, quiet: bool = False,
                 counts: CountSource | None = None, counts_of: str = "", live: bool | None = None) -> None:
        self.command = command
        self.counts_of = counts_of  # whose counts they are, when not the one run's ("latest run")
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.counts_source = counts
        self._live = _is_terminal(self.stream) if live is None else live
        self._started = time.monotonic()
        self._stage = ""
        self._stage_started = self._started
        self._detail = ""
        self._checks = 0
        self._nodes_before: int | None = None
        self._nodes: int | None = None
        self._counts: Counts | None = None
        self._counts_read_at = 0.0
        self._pending: str | None = None  # a pipe's phase line held back (the last one was too recent)
        self._printed_at: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._terminal: _StatusRow | None = None
        self._entered = False

    def __enter__(self) -> Progress:
        if self.quiet:
            return self
        if self._live:
            self._terminal = _StatusRow.open(self.stream)
        self._entered = True
        with self._lock:  # a stage given before: shown now
            if self._stage and self._terminal is not None:
                self._draw()
            elif self._stage:
                self._flush_pending()
        self._thread = threading.Thread(target=self._tick, name="dynscope-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            if self._terminal is not None:
                if exc[0] is None and self._stage:
                    self._done_line()
                self._terminal.close()
                self._terminal = None

    # -- what the command says -------------------------------------------------------------

    def stage(self, text: str) -> None:
        if self.quiet:
            return
        with self._lock:
            if self._terminal is not None and self._stage:
                self._done_line()
            self._stage, self._stage_started, self._detail = text, time.monotonic(), ""
            if not self._entered:
                self._pending = text
            elif self._terminal is None:
                self._pending = text
                self._flush_pending()
            else:
                self._draw()

    def note(self, text: str) -> None:
        """A message that is not a phase (a warning, a finding): said at once, never held or dropped."""
        if self.quiet:
            return
        with self._lock:
            if self._terminal is not None:
                self._terminal.line(text)
                self._draw()
            else:
                _write(self.stream, f"dynscope: {_one_line(text)}\n")

    def update(self, *, checks: int | None = None, nodes: int | None = None, detail: str | None = None) -> None:
        if checks is not None:
            self._checks = checks
        if nodes is not None:
            self._nodes_before = nodes if self._nodes_before is None else self._nodes_before
            self._nodes = nodes
        if detail is not None:
            self._detail = detail

    def status_text(self) -> str:
        """The status line's words (without the spinner)."""
        # the short, changing facts first: a narrow terminal crops the end (the phase's own words)
        parts = [self.command]
        if self._counts is not None:
            parts.append(f"{self.counts_of}: {self._counts.words()}" if self.counts_of else self._counts.words())
        if self._checks:
            parts.append(f"{self._checks} checks")
        if self._nodes is not None:
            parts.append(f"nodes {self._nodes_before} → {self._nodes}" if self._nodes != self._nodes_before
                         else f"{self._nodes} nodes")
        parts.append(f"{time.monotonic() - self._started:.0f} s")
        if self._stage:
            parts.append(self._stage)
        if self._detail:
            parts.append(self._detail)
        return " · ".join(parts)

    # -- the ticker ------------------------------------------------------------------------

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            self._read_counts()
            with self._lock:
                if self._stop.is_set():
                    return
                if self._terminal is not None:
                    self._draw()
                else:
                    self._flush_pending()

    def _read_counts(self) -> None:
        if self.counts_source is None or time.monotonic() - self._counts_read_at < READ_EVERY_S:
            return
        self._counts_read_at = time.monotonic()
        try:
            counts = self.counts_source()
        except Exception:  # a progress line never ends a run: no counts this time
            counts = None
        if counts is not None:
            self._counts = counts

    def _draw(self) -> None:
        assert self._terminal is not None
        frame = _SPINNER[int((time.monotonic() - self._started) / TICK_S) % len(_SPINNER)]
        self._terminal.draw(f"{frame} {self.status_text()}")

    def _done_line(self) -> None:
        assert self._terminal is not None
        self._terminal.line(f"✓ {self._stage} ({time.monotonic() - self._stage_started:.1f} s)")

    def _flush_pending(self) -> None:
        """A pipe: the held phase line, once the last line is old enough."""
        now = time.monotonic()
        if self._pending is None or (self._printed_at is not None and now - self._printed_at < PIPE_INTERVAL_S):
            return
        text, self._pending, self._printed_at = self._pending, None, now
        # (no counts here: at a phase's start they would be the last run's, not this one's)
        _write(self.stream, f"dynscope: {_one_line(text)}…\n")  # a progress line ends in …


class _StatusRow:
    """The terminal's last row, kept for the status: the rows above scroll on their own."""

    def __init__(self, stream: TextIO, fd: int, rows: int) -> None:
        self.stream = stream
        self.fd = fd
        self.rows = rows

    @classmethod
    def open(cls, stream: TextIO) -> _StatusRow | None:
        fd = stream.fileno()
        rows = _size(fd)[1]
        if rows < 3:
            return None
        stream.flush()
        # A new line so the cursor is not on the last row; the region then keeps the last row out.
        _put(fd, f"\n\x1b7\x1b[1;{rows - 1}r\x1b8\x1b[1A")
        return cls(stream, fd, rows)

    def draw(self, text: str) -> None:
        columns, rows = _size(self.fd)
        again = ""
        if rows != self.rows and rows >= 3:  # the terminal was resized: the region follows its last row
            again, self.rows = f"\x1b[1;{rows - 1}r", rows
        shown = _one_line(text)[: max(columns - 1, 1)]
        _put(self.fd, f"\x1b7{again}\x1b[{self.rows};1H\x1b[2K{shown}\x1b8")

    def line(self, text: str) -> None:
        """A line of dynscope's own above the status (where the program's output goes)."""
        self.stream.flush()
        _put(self.fd, _one_line(text) + "\n")

    def close(self) -> None:
        self.stream.flush()
        _put(self.fd, f"\x1b7\x1b[r\x1b[{self.rows};1H\x1b[2K\x1b8")


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM", "") not in ("", "dumb")
    except (ValueError, OSError, AttributeError):
        return False


def _size(fd: int) -> tuple[int, int]:
    try:
        size = os.get_terminal_size(fd)
        return size.columns, size.lines
    except OSError:
        return 80, 0


def _put(fd: int, text: str) -> None:
    """One write: the terminal never sees half a redraw between two of the program's writes."""
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    except OSError:
        pass


def _write(stream: TextIO, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


def _one_line(text: str) -> str:
    from dynscope.safe_text import one_line

    return one_line(text)
