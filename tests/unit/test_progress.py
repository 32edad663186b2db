"""Progress on stderr (issue 42 item 3): the live counts read from a capture as it is written, the
status line on a terminal (a pseudo-terminal here), one line per phase in a pipe, nothing with -q."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
from pathlib import Path

import pytest
from fake_capture import FakeCapture

from dynscope.commands import main
from dynscope.commands._progress import Progress
from dynscope.runner.live_counts import CaptureCounter, Counts, NewestCapture

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
RECORDED = sorted(CAPTURES.glob("*/*.dynscope"))


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_live_counts_are_the_summarys(path, capsys):
    counts = CaptureCounter(str(path)).read()
    assert main(["summary", "--json", str(path)]) == 0
    totals = json.loads(capsys.readouterr().out)["totals"]
    assert counts == Counts(totals["frames"], totals["graph_breaks"], totals["recompiles"])


def test_counts_grow_as_the_capture_is_written(tmp_path):
    path = tmp_path / "run.dynscope"
    counter = CaptureCounter(str(path))
    assert counter.read() is None  # nothing written yet
    fake = FakeCapture(path)
    fake.compile("0/0").graph_break("0/0", "Unsupported Tensor.item() call")
    assert counter.read() == Counts(1, 1, 0)  # read while the writer still has it open
    fake.compile("1/0").compile("0/1")
    assert counter.read() == Counts(2, 1, 1)
    fake.close()
    assert counter.read() == Counts(2, 1, 1)
    assert Counts(2, 1, 1).words() == "2 frames compiled · 1 break · 1 recompile"


def test_newest_capture_follows_the_run_in_progress(tmp_path):
    first = FakeCapture(tmp_path / "baseline.dynscope")
    first.compile("0/0").compile("0/1")
    first.close()
    newest = NewestCapture(str(tmp_path))
    assert newest.read() == Counts(1, 0, 1)
    later = FakeCapture(tmp_path / "trial-1.dynscope")
    os.utime(tmp_path / "trial-1.dynscope")
    later.compile("0/0")
    assert newest.read() == Counts(1, 0, 0)
    later.close()
    assert NewestCapture(str(tmp_path / "missing")).read() is None


def test_a_pipe_gets_one_line_per_phase_at_most(tmp_path):
    out = io.StringIO()
    with Progress("fix", stream=out, live=False) as progress:
        for i in range(1, 6):  # five phases within the same few seconds: the first is said, the rest held
            progress.stage(f"run {i}/5: a remedy")
    lines = out.getvalue().splitlines()
    assert lines == ["dynscope: run 1/5: a remedy…"]


def test_a_note_is_never_held_or_dropped():
    out = io.StringIO()
    with Progress("fix", stream=out, live=False) as progress:
        progress.stage("run 1/2: a remedy")
        progress.stage("run 2/2: another")  # held: too soon after the first
        progress.note("outputs differ between two plain runs")
    assert out.getvalue().splitlines() == ["dynscope: run 1/2: a remedy…", "dynscope: outputs differ between two plain runs"]


def test_quiet_says_nothing():
    out = io.StringIO()
    with Progress("explain", stream=out, quiet=True, live=False) as progress:
        progress.stage("running prog.py")
    assert out.getvalue() == ""


def _read_all(fd: int) -> bytes:
    chunks = []
    while select.select([fd], [], [], 0.2)[0]:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def test_on_a_terminal_a_status_row_below_the_programs_output(tmp_path, monkeypatch):
    import fcntl
    import struct
    import termios

    monkeypatch.setenv("TERM", "xterm")
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    stream = os.fdopen(os.dup(secondary), "w")
    fake = FakeCapture(tmp_path / "run.dynscope")
    fake.compile("0/0").graph_break("0/0", "Unsupported").compile("1/0").compile("1/1")
    try:
        with Progress("explain", stream=stream, counts=CaptureCounter(str(fake.path)).read) as progress:
            progress.stage("running prog.py")
            os.write(secondary, b"the program's own line\n")  # as the program would, on the same terminal
            import time

            time.sleep(1.6)  # (not a timing assertion: long enough for a count read and a redraw)
        raw = _read_all(primary).decode()
    finally:
        fake.close()
        stream.close()
        os.close(primary)
        os.close(secondary)
    assert "\x1b[1;23r" in raw  # rows 1-23 scroll; row 24 is the status's
    assert re.search(r"\x1b7\x1b\[24;1H\x1b\[2K. explain · 2 frames compiled · 1 break · 1 recompile · \d+ s · "
                     r"running prog\.py\x1b8", raw), raw  # the counts of the capture, drawn in one write
    assert "the program's own line\r\n" in raw  # untouched
    assert "✓ running prog.py (" in raw  # the phase done, a line above the status
    assert raw.endswith("\x1b7\x1b[r\x1b[24;1H\x1b[2K\x1b8")  # at the end: the region reset, the status row cleared
