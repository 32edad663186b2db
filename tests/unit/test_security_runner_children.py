"""Child processes' captures without torch: the writer across os.fork, which files beside a
capture count as its children (planted, foreign, special and damaged ones do not), and how the
summary names them."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from hostile import small_capture

from dynscope.runner.children import child_capture_path, find_child_captures
from dynscope.store.writer import CaptureWriter

ROOT_PID, ROOT_STARTED = 4242, 1700000000.25


def test_child_capture_names_sit_beside_the_programs_like_ranks():
    assert child_capture_path("/d/run.dynscope", 12) == "/d/run.pid12.dynscope"
    assert child_capture_path("/d/run.rank1.dynscope", 12) == "/d/run.rank1.pid12.dynscope"
    assert child_capture_path("/d/run", 12) == "/d/run.pid12.dynscope"


def test_forks_while_another_thread_writes_leave_the_parents_capture_whole(tmp_path):
    """The recorder's fork hooks in miniature: hold the writer across fork, abandon its
    connection in the child (which closes the child's copy of it), then exit without cleanup."""
    path = tmp_path / "run.dynscope"
    writer = CaptureWriter(path)
    stop, written = threading.Event(), []

    def write() -> None:
        i = 0
        while not stop.is_set():
            writer.append("x", {"i": i}, "p" * 3000 + str(i))
            i += 1
        written.append(i)

    thread = threading.Thread(target=write)
    thread.start()
    started = time.monotonic()
    for _ in range(40):
        writer.hold_for_fork()
        pid = os.fork()
        if pid == 0:
            writer.abandon_in_forked_child()
            assert writer.append("from the child", {}) is None  # never through the parent's connection
            os._exit(0)
        writer.release_after_fork()
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    stop.set()
    thread.join()
    writer.close()
    assert time.monotonic() - started < 60
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM events").fetchone() == (written[0],)
        assert db.execute("SELECT count(*) FROM events WHERE name = 'from the child'").fetchone() == (0,)


def _child(path: Path, *, root_pid=ROOT_PID, root_started=ROOT_STARTED, compiles=1) -> Path:
    writer = CaptureWriter(path)
    writer.set_meta(pid=123, root_pid=root_pid, root_started=root_started, parent_pid=root_pid,
                    started=root_started + 1)
    for i in range(compiles):
        writer.append("dynamo_start", {"dynamo_start": {"stack": []}}, compile_id=f"{i}/0", attempt=0)
    writer.close()
    return path


def test_only_this_runs_children_count(tmp_path):
    root = small_capture(tmp_path / "run.dynscope")
    _child(tmp_path / "run.pid11.dynscope", compiles=2)
    _child(tmp_path / "run.pid12.dynscope", compiles=0)
    _child(tmp_path / "run.pid13.dynscope", root_pid=1)  # another run's (or planted): wrong program
    _child(tmp_path / "run.pid14.dynscope", root_started=ROOT_STARTED + 1)  # same pid, earlier run
    _child(tmp_path / "other.pid15.dynscope")  # another capture's child
    _child(tmp_path / "run.pid16x.dynscope")  # not a pid
    (tmp_path / "run.pid17.dynscope").write_text("not a capture")
    os.mkfifo(tmp_path / "run.pid18.dynscope")  # would block an open() forever
    os.symlink(tmp_path / "run.pid11.dynscope", tmp_path / "run.pid19.dynscope")
    (tmp_path / "run.pid20.dynscope").mkdir()
    damaged = _child(tmp_path / "run.pid21.dynscope")
    with sqlite3.connect(damaged) as db:
        db.execute("UPDATE meta SET value = '{not json' WHERE key = 'pid'")
    started = time.monotonic()
    found = find_child_captures(str(root), root_pid=ROOT_PID, root_started=ROOT_STARTED)
    assert time.monotonic() - started < 10
    assert [(c.file, c.pid, c.compiles) for c in found] == [("run.pid11.dynscope", 11, 2), ("run.pid12.dynscope", 12, 0)]


def test_the_summary_names_compiling_children_and_escapes_their_names(tmp_path):
    root = tmp_path / "run.dynscope"
    writer = CaptureWriter(root)
    writer.set_meta(dynscope_version="0", torch_version="2.13.0", command=["dynscope", "explain", "prog.py"],
                    started=1.0, finished=2.0, exit_code=0,
                    child_captures=[{"file": "run.pid7.dynscope", "pid": 7, "compiles": 3},
                                    {"file": "run.pid8\x1b]0;owned\x07.dynscope", "pid": 8, "compiles": 1},
                                    {"file": "run.pid9.dynscope", "pid": 9, "compiles": 0}])
    writer.close()
    result = subprocess.run([sys.executable, "-m", "dynscope", "summary", str(root)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    words = " ".join(result.stdout.split())  # rich wraps at the terminal's width
    assert ("torch.compile compiled nothing in this process; 2 child processes compiled: see run.pid7.dynscope, "
            "run.pid8\\x1b]0;owned\\x07.dynscope") in words
    assert "Was the compiled function called" not in result.stdout and "run.pid9" not in result.stdout
    assert "\x1b" not in result.stdout + result.stderr and "\x07" not in result.stdout
