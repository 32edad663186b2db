"""Files from strangers, round two (issue 20): `import` streams whatever it is fed (item 7), an
incomplete capture says so and never passes `check` (item 8), the writer's lock never follows a
link or truncates what dynscope did not write and `import -o` takes it (item 4, writer side),
and a read-only output or a binary `--allow` file is one line, exit 2 (item 13).

Every attack runs the real command in its own process (`python -m dynscope ...`), with its
time and peak RSS measured; none imports torch."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import small_capture
from hostile_imports import (
    CONTROL,
    GRAPH_BREAKS_LOG,
    HEADER,
    MB,
    artifact_event,
    capture_of_a_killed_writer,
    gzip_with_huge_event,
    gzip_with_huge_line,
    one_line_error,
    real_log,
    run_dynscope,
    tree_state,
)

from dynscope.trace_import import ImportStats, parse_trace_lines

RECORDED = Path(__file__).resolve().parent.parent / "data" / "captures" / "2.13.0+cpu" / "graph_breaks_eager.dynscope"
# Peak RSS of an import whatever its input: the 64 MiB event bound held once, plus the
# interpreter (~30 MB) and a 4 MB read. (Before: 5.3 GB for the 1 GiB line, growing without end
# for a link to /dev/zero.)
IMPORT_MEMORY_CEILING = 200 * MB
REAL_LOG_EVENTS = 183
ROOT = os.geteuid() == 0


@contextlib.contextmanager
def tmpfs(mount: Path, options: str):
    """A small tmpfs at ``mount`` (a full disk, or a read-only one); skips without root."""
    if not ROOT or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def summary_json(capture: Path, cwd: Path) -> dict:
    ran = run_dynscope(["summary", str(capture), "--json"], cwd)
    assert ran.code == 0, ran.err
    return json.loads(ran.out)


# -- item 7: import streams whatever it is fed ------------------------------------------------

def test_a_1_gib_line_in_a_1_mb_gzip_is_skipped_and_counted_in_bounded_memory(tmp_path):
    log = gzip_with_huge_line(tmp_path / "dedicated_log_torch_trace_huge.log.gz", 1024 * MB, after=real_log())
    assert log.stat().st_size < 2 * MB  # the attack: a 1 MB gzip holding a 1 GiB line
    before = tree_state(tmp_path)
    out = tmp_path / "out.dynscope"
    ran = run_dynscope(["import", str(log), "-o", str(out)], tmp_path, timeout=120)
    assert ran.code == 0, ran.err
    assert ran.rss < IMPORT_MEMORY_CEILING, ran.rss
    assert ran.seconds < 90
    assert ran.err.count("\n") == 1 and not CONTROL.search(ran.err)
    assert f"{REAL_LOG_EVENTS} events from 1 file" in ran.err and "1 oversized event skipped (over 64 MiB" in ran.err
    assert tree_state(tmp_path, skip=(out,)) == before  # nothing else written
    doc = summary_json(out, tmp_path)
    assert doc["complete"] is True and doc["totals"]["compiles"] == 5  # what follows the line is all there
    assert doc["imported"]["oversized_events"] == 1
    assert "over the 64 MiB limit: skipped" in doc["imported"]["bad_examples"][0]


def test_a_huge_event_of_short_lines_is_skipped_too(tmp_path):
    """No single line is long: only the event (its payload lines) is; it is never held whole either."""
    log = gzip_with_huge_event(tmp_path / "dedicated_log_torch_trace_lines.log.gz", 256 * MB, after=real_log())
    out = tmp_path / "out.dynscope"
    ran = run_dynscope(["import", str(log), "-o", str(out)], tmp_path, timeout=120)
    assert ran.code == 0, ran.err
    assert ran.rss < IMPORT_MEMORY_CEILING, ran.rss
    assert "1 oversized event skipped (over 64 MiB" in ran.err and f"{REAL_LOG_EVENTS} events" in ran.err
    assert summary_json(out, tmp_path)["totals"]["graph_breaks"] == 4


def test_a_wide_json_event_line_is_skipped_before_it_is_parsed(tmp_path):
    """60 MB of `[{},{},...]` in a 61 KB gzip: a dict per 3 bytes took 1.9 GB parsed. An event
    line over 1 MiB (torch's largest is ~40 KB) is skipped before json.loads."""
    log = tmp_path / "dedicated_log_torch_trace_wide.log.gz"
    with gzip.open(log, "wb") as f:
        f.write(HEADER + b'{"str": ["/a.py", 0], "a": [' + b"{}," * (20 * MB) + b"{}]}\n")
        f.write(real_log())
    assert log.stat().st_size < 200_000
    out = tmp_path / "out.dynscope"
    ran = run_dynscope(["import", str(log), "-o", str(out)], tmp_path)
    assert ran.code == 0, ran.err
    assert ran.rss < IMPORT_MEMORY_CEILING, ran.rss
    doc = summary_json(out, tmp_path)
    assert doc["imported"]["oversized_events"] == 1 and doc["imported"]["events"] == REAL_LOG_EVENTS
    assert "an event line of 62,914," in doc["imported"]["bad_examples"][0]
    assert "over the 1 MiB limit" in doc["imported"]["bad_examples"][0]


def test_an_oversized_event_does_not_disturb_its_neighbours_wherever_the_chunks_end():
    """The bound as the parser applies it (a small limit, so the test holds nothing big): the
    events around an oversized one are read exactly as without it, for any chunking."""
    text = real_log()
    cut = text.index(b"\nV", len(text) // 2) + 1  # an event boundary in the middle
    limit = 1 * MB
    big = HEADER + b'{"str": ["' + b"B" * (limit + 10) + b'", 0]}\n'
    hostile = text[:cut] + big + text[cut:]

    def records(data: bytes, size: int):
        stats = ImportStats()
        chunks = (data[i:i + size] for i in range(0, len(data), size))
        found = [(r.metadata, r.payload) for r in parse_trace_lines(chunks, stats, year=2026, limit=limit)]
        return found, stats

    first_line_of_big = text[:cut].count(b"\n") + 1
    plain, plain_stats = records(text, 1 << 22)
    assert plain_stats.oversized_events == 0 and len(plain) == REAL_LOG_EVENTS
    for size in (1000, 4096, 65536, 1 << 22, len(hostile)):
        found, stats = records(hostile, size)
        assert found == plain, size
        assert (stats.oversized_events, stats.bad_lines) == (1, plain_stats.bad_lines), size
        assert stats.lines == plain_stats.lines + 1, size  # the skipped line is counted as read
        assert stats.bad_examples[0].startswith(f"log:{first_line_of_big}: an event of"), size


def test_unreadable_lines_are_counted_never_fatal(tmp_path):
    marker = tmp_path / "pwned"
    lines = [
        b"\x00\x01\x02 binary garbage \xff\xfe\n",
        HEADER + b'{"str": ["\xff\xfe not utf-8", 0]}\n',          # not UTF-8: read as U+FFFD, kept
        HEADER + b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",  # nesting: exit 70 before
        HEADER + b"[1, 2, 3]\n",
        HEADER + b'{"dynamo_start": {"stack": [\n',                   # cut short
        b"\tpayload line without an event\n",
        HEADER + b'{"str": ["\x1b]0;owned\x07\x1b[2J\xc2\x9b31m\xe2\x80\xae", 1]}\n',  # raw controls: not JSON
        HEADER + b'{"str": ["\\u001b]0;owned\\u0007\\u001b[2J\\u009b31m\\u202e", 1]}\n',  # escaped: kept
        artifact_event("exec", f"__import__('os').system('touch {marker}')".encode()),
    ]
    log = tmp_path / "dedicated_log_torch_trace_bad.log"
    log.write_bytes(real_log() + b"".join(lines))
    out = tmp_path / "out.dynscope"
    ran = run_dynscope(["import", str(log), "-o", str(out)], tmp_path)
    assert ran.code == 0, ran.err
    assert not CONTROL.search(ran.out + ran.err) and "Traceback" not in ran.err
    doc = summary_json(out, tmp_path)
    assert doc["imported"]["bad_lines"] == 5, doc["imported"]
    assert any("nested too deeply" in e for e in doc["imported"]["bad_examples"])
    assert doc["imported"]["events"] == REAL_LOG_EVENTS + 3
    for args in (["summary", str(out)], ["report", str(out), "--format", "md"]):
        shown = run_dynscope(args, tmp_path)
        assert shown.code == 0 and not CONTROL.search(shown.out + shown.err), args
    assert not marker.exists()


def test_special_files_in_a_log_directory_are_skipped_with_a_note(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(GRAPH_BREAKS_LOG, logs / GRAPH_BREAKS_LOG.name)
    os.mkfifo(logs / "dedicated_log_torch_trace_fifo.log")                    # blocked forever before
    os.mkfifo(logs / "dedicated_log_torch_trace_\x1b]0;title\x07.log")         # and its name escapes
    (logs / "dedicated_log_torch_trace_zero.log").symlink_to("/dev/zero")        # 2.7 GB in 10 s before
    (logs / "to_fifo.log").symlink_to(logs / "dedicated_log_torch_trace_fifo.log")
    (logs / "dangling.log").symlink_to(tmp_path / "nowhere")
    out = tmp_path / "out.dynscope"
    ran = run_dynscope(["import", str(logs), "-o", str(out)], tmp_path, timeout=60)
    assert ran.code == 0, ran.err
    assert ran.seconds < 30 and ran.rss < IMPORT_MEMORY_CEILING
    assert not CONTROL.search(ran.err)
    notes = ran.err.splitlines()[:-1]
    assert sorted(n.rsplit(": ", 1)[1].removesuffix(", skipped") for n in notes) == ["a FIFO", "a FIFO", "a FIFO", "a character device",
                                                            "unreadable (No such file or directory)"], notes
    assert any("\\x1b]0;title\\x07" in n for n in notes)  # shown, not obeyed
    assert ran.err.splitlines()[-1].startswith(f"dynscope: {REAL_LOG_EVENTS} events from 1 file")
    doc = summary_json(out, tmp_path)
    assert len(doc["imported"]["skipped_files"]) == 5 and doc["totals"]["compiles"] == 5


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_special_file_named_on_the_command_line_is_refused(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "trace.log"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    ran = run_dynscope(["import", str(path), "-o", str(tmp_path / "out.dynscope")], tmp_path, timeout=30)
    line = one_line_error(ran)
    assert line == f"dynscope: cannot read {path}: it is {'a FIFO' if kind == 'fifo' else 'a character device'}, " \
                   "not a log file"
    assert not (tmp_path / "out.dynscope").exists()


def test_a_corrupt_gzip_is_one_line_not_an_internal_error(tmp_path):
    """Deflate data that does not inflate (zlib.error: exit 70 before)."""
    data = gzip.compress(real_log())
    log = tmp_path / "dedicated_log_torch_trace_x.log.gz"
    log.write_bytes(data[:1000] + bytes(b ^ 0xFF for b in data[1000:1100]) + data[1100:])
    ran = run_dynscope(["import", str(log), "-o", str(tmp_path / "out.dynscope")], tmp_path)
    assert "stopped reading: Error -3 while decompressing" in one_line_error(ran)


# -- item 4 (writer side) and 13: what `import -o` writes to ---------------------------------------

@pytest.mark.parametrize("command", ["import", "explain"])
@pytest.mark.parametrize("target", ["fifo", "symlink", "device", "not a capture"])
def test_an_output_that_is_not_a_capture_file_is_refused_before_it_is_opened(tmp_path, target, command):
    out = tmp_path / "out.dynscope"
    marker = tmp_path / "program-ran"
    program = tmp_path / "prog.py"
    program.write_text(f"open({str(marker)!r}, 'w').close()\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    if target == "fifo":
        os.mkfifo(out)  # opened to read its header, it blocked forever before
    elif target == "symlink":
        out.symlink_to(victim)
    elif target == "device":
        if not ROOT:
            pytest.skip("making a device node needs root")
        os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own: removed before, as root
    else:
        out.write_text("my notes\n")
    before = tree_state(tmp_path)
    args = ["import", str(GRAPH_BREAKS_LOG), "-o", str(out)] if command == "import" else \
        ["explain", "-q", "-o", str(out), str(program)]
    ran = run_dynscope(args, tmp_path, timeout=30)
    line = one_line_error(ran)
    assert not marker.exists()  # explain refuses before the program runs
    expected = {"fifo": "it is a FIFO", "symlink": "it is a symbolic link", "device": "it is a character device",
                "not a capture": "it is not a dynscope capture"}[target]
    assert expected in line, line
    assert tree_state(tmp_path) == before


def test_a_read_only_output_is_one_line(tmp_path):
    """Exit 70 ("this is a dynscope bug") before, for a new file and for a capture to replace."""
    ro = tmp_path / "ro"
    with tmpfs(ro, "size=1m"):
        shutil.copy(RECORDED, ro / "old.dynscope")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        program = tmp_path / "prog.py"
        program.write_text("print('ran')\n")
        for name in ("new.dynscope", "old.dynscope"):
            ran = run_dynscope(["import", str(GRAPH_BREAKS_LOG), "-o", str(ro / name)], tmp_path)
            assert one_line_error(ran) == f"dynscope: cannot write capture {ro / name}: Read-only file system"
            ran = run_dynscope(["explain", "-o", str(ro / name), str(program)], tmp_path)
            assert one_line_error(ran) == f"dynscope: cannot write capture {ro / name}: Read-only file system"
            assert ran.out == ""  # the program never ran
        assert sorted(p.name for p in ro.iterdir()) == ["old.dynscope"]


def test_an_import_onto_a_full_disk_says_so_and_its_capture_fails_check(tmp_path):
    small = tmp_path / "small"
    with tmpfs(small, "size=160k"):
        out = small / "out.dynscope"
        ran = run_dynscope(["import", str(GRAPH_BREAKS_LOG), "-o", str(out)], tmp_path)
        assert one_line_error(ran) == (f"dynscope: stopped importing into {out}: the disk is full; the capture keeps "
                                       "what was written before and says it is incomplete")
        summary = run_dynscope(["summary", str(out)], tmp_path)
        assert summary.code == 0, summary.err
        assert summary.out.splitlines()[0] == (f"INCOMPLETE CAPTURE {out}: a write failed (the disk is full) and "
                                               "recording stopped there; everything below covers only what was "
                                               "recorded before that")
        doc = summary_json(out, tmp_path)
        assert doc["complete"] is False and "the disk is full" in doc["incomplete_reason"]
        for limit in ("0", "1000"):  # passed before, with "0 graph breaks"
            check = run_dynscope(["check", str(out), "--max-graph-breaks", limit], tmp_path)
            assert "is an incomplete capture: a write failed (the disk is full)" in one_line_error(check)
            assert check.out == ""


# -- item 4: the lock never follows a link, never truncates what it did not write -------------------

def _lock_attack(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """``out.dynscope.lock`` made into something dynscope did not write; returns (out, victim)."""
    out = tmp_path / "out.dynscope"
    lock = Path(str(out) + ".lock")
    victim = tmp_path / "outside" / "settings.txt"
    victim.parent.mkdir()
    victim.write_text("precious settings\n")
    if kind == "symlink":
        lock.symlink_to(victim)  # truncated and overwritten with a pid before
    elif kind == "dangling symlink":
        lock.symlink_to(tmp_path / "outside" / "created-through-the-link")
    elif kind == "hard link":
        os.link(victim, lock)
    elif kind == "fifo":
        os.mkfifo(lock)
    elif kind == "foreign content":
        lock.write_text("not a pid at all\n")
    elif kind == "other user":
        if not ROOT:
            pytest.skip("giving a file away needs root")
        lock.write_text("123")
        os.chown(lock, 65534, 65534)
    return out, victim


LOCK_ATTACKS = ["symlink", "dangling symlink", "hard link", "fifo", "foreign content", "other user"]


@pytest.mark.parametrize("kind", LOCK_ATTACKS)
def test_import_refuses_a_lock_it_did_not_write(tmp_path, kind):
    out, victim = _lock_attack(tmp_path, kind)
    before = tree_state(tmp_path)
    ran = run_dynscope(["import", str(GRAPH_BREAKS_LOG), "-o", str(out)], tmp_path, timeout=30)
    line = one_line_error(ran)
    assert line.startswith(f"dynscope: refusing to use the lock {out}.lock: "), line
    assert tree_state(tmp_path) == before  # the victim, the link and everything else as they were
    assert victim.read_text() == "precious settings\n"


@pytest.mark.parametrize("kind", ["symlink", "hard link"])
def test_explain_refuses_a_lock_it_did_not_write_before_the_program_runs(tmp_path, kind):
    """The issue's attack: `explain` followed a symlink at <capture>.lock and truncated its target."""
    out, victim = _lock_attack(tmp_path, kind)
    marker = tmp_path / "program-ran"
    program = tmp_path / "prog.py"
    program.write_text(f"open({str(marker)!r}, 'w').close()\n")
    before = tree_state(tmp_path)
    ran = run_dynscope(["explain", "-q", "-o", str(out), str(program)], tmp_path, timeout=60)
    assert one_line_error(ran).startswith(f"dynscope: refusing to use the lock {out}.lock: ")
    assert not marker.exists() and tree_state(tmp_path) == before


def test_a_lock_left_by_a_killed_run_is_reused_and_removed(tmp_path):
    out = tmp_path / "out.dynscope"
    lock = Path(str(out) + ".lock")
    lock.write_text("4242")  # what a SIGKILLed run leaves: its pid, nobody holding it
    ran = run_dynscope(["import", "-q", str(GRAPH_BREAKS_LOG), "-o", str(out)], tmp_path)
    assert ran.code == 0 and ran.err == "", ran.err
    assert not lock.exists() and summary_json(out, tmp_path)["complete"] is True


_HOLDER = """
import sys
from dynscope.runner.launcher import exclusive_writer  # what `explain` holds while its program runs
with exclusive_writer(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.readline()
"""


@contextlib.contextmanager
def lock_held(capture: Path):
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(capture)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        yield holder.pid
    finally:
        holder.communicate("\n", timeout=30)


def test_import_never_replaces_a_capture_a_running_explain_holds(tmp_path):
    """`import -o X` ignored the writer lock and replaced a running explain's capture before."""
    out = tmp_path / "run.dynscope"
    shutil.copy(RECORDED, out)
    with lock_held(out) as pid:
        before = tree_state(tmp_path)
        ran = run_dynscope(["import", str(GRAPH_BREAKS_LOG), "-o", str(out)], tmp_path)
        assert one_line_error(ran) == (f"dynscope: another dynscope run (pid {pid}) is writing {out}: wait for it "
                                       "to end or choose another -o")
        assert tree_state(tmp_path) == before


def test_a_multi_rank_import_writes_nothing_while_any_of_its_outputs_is_held(tmp_path):
    ranks = Path(GRAPH_BREAKS_LOG).parent.parent / "rank_divergence"
    out = tmp_path / "run.dynscope"
    with lock_held(tmp_path / "run.rank1.dynscope"):
        ran = run_dynscope(["import", str(ranks), "-o", str(out)], tmp_path)
        assert "is writing" in one_line_error(ran)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["run.rank1.dynscope.lock"]  # rank 0 untouched too


# -- item 8: an incomplete capture says so -----------------------------------------------------------

def test_a_capture_whose_writer_was_killed_says_so_first_and_fails_check(tmp_path):
    """dynscope itself SIGKILLed (nothing outlived it to record the end): still readable, marked."""
    capture = capture_of_a_killed_writer(tmp_path / "killed.dynscope")
    summary = run_dynscope(["summary", str(capture)], tmp_path)
    assert summary.code == 0, summary.err
    first = summary.out.splitlines()[0]
    assert first.startswith(f"INCOMPLETE CAPTURE {capture}: the recording has not ended: the process writing it is "
                            "still running, or was killed before it could close the capture"), first
    assert "3 frames" in summary.out  # what was committed before the kill is all there
    doc = summary_json(capture, tmp_path)
    assert doc["complete"] is False and doc["incomplete_reason"].startswith("the recording has not ended")
    base = small_capture(tmp_path / "base.dynscope")
    for args in (["--max-graph-breaks", "1000"], ["--max-errors", "0", "--max-recompiles", "0"],
                 ["--baseline", str(capture)]):
        target = base if "--baseline" in args else capture
        check = run_dynscope(["check", str(target), *args], tmp_path)
        assert one_line_error(check).startswith(f"dynscope: {capture} is an incomplete capture: "), args


def test_the_launcher_settles_what_its_child_left_unsaid_but_keeps_a_cut(tmp_path):
    """`explain`'s launcher outlives its child. A program that ended itself with os._exit left
    every event committed: complete. A program killed by a signal was cut where the recording
    stops: incomplete, and the summary names the signal. A cut by a failed write stays."""
    from dynscope.runner.launcher import finish_capture

    exited = capture_of_a_killed_writer(tmp_path / "exited.dynscope")
    assert finish_capture(str(exited), 3, 1.5)  # what the launcher sees after os._exit(3)
    assert summary_json(exited, tmp_path)["complete"] is True

    killed = capture_of_a_killed_writer(tmp_path / "killed.dynscope")
    assert finish_capture(str(killed), -signal.SIGKILL, 1.5)
    summary = run_dynscope(["summary", str(killed)], tmp_path)
    first, second = summary.out.splitlines()[:2]
    assert first == (f"INCOMPLETE CAPTURE {killed}: the program was killed by signal 9 (SIGKILL) before it ended; "
                     "everything below covers only what was recorded before that"), summary.out
    assert second.startswith("dynscope · torch ? · killed by signal 9")
    doc = summary_json(killed, tmp_path)
    assert (doc["complete"], doc["run"]["signal"]) == (False, 9)
    check = run_dynscope(["check", str(killed), "--max-graph-breaks", "0"], tmp_path)
    assert "killed by signal 9" in one_line_error(check)

    cut = small_capture(tmp_path / "cut.dynscope")
    with sqlite3.connect(cut) as db:  # what the writer records when a write fails
        db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                       [("complete", "false"), ("incomplete_reason", json.dumps("a write failed (the disk is full) "
                                                                                "and recording stopped there"))])
    assert finish_capture(str(cut), 0, 1.5)
    doc = summary_json(cut, tmp_path)
    assert (doc["complete"], doc["run"]["exit_code"]) == (False, 0)
    assert doc["incomplete_reason"] == "a write failed (the disk is full) and recording stopped there"


def test_whole_captures_new_and_old_are_complete(tmp_path):
    fresh = small_capture(tmp_path / "fresh.dynscope")
    with sqlite3.connect(fresh) as db:
        assert dict(db.execute("SELECT key, value FROM meta WHERE key LIKE '%complete%'")) == {"complete": "true"}
    for capture in (fresh, RECORDED):  # RECORDED predates the mark: no key at all
        doc = summary_json(capture, tmp_path)
        assert (doc["complete"], doc["incomplete_reason"]) == (True, None)
        summary = run_dynscope(["summary", str(capture)], tmp_path)
        assert "INCOMPLETE" not in summary.out
        check = run_dynscope(["check", str(capture), "--max-graph-breaks", "1000"], tmp_path)
        assert check.code == 0, check.err


# -- item 13: a hostile --allow file is one line, exit 2 ----------------------------------------------

@pytest.mark.parametrize("kind", ["binary", "fifo", "device", "deep", "huge"])
def test_a_hostile_allow_file_is_one_line(tmp_path, kind):
    allow = tmp_path / "allow.toml"
    if kind == "binary":
        allow.write_bytes(b"\x00\xff\xfe\x89PNG\r\n\x1a\n" + os.urandom(200))  # exit 70 before
    elif kind == "fifo":
        os.mkfifo(allow)  # blocked forever before
    elif kind == "device":
        allow = Path("/dev/zero")  # read without end before
    elif kind == "deep":
        allow.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")  # RecursionError, exit 70 before
    else:
        allow.write_text("# " + "x" * (2 * MB) + "\n")
    capture = small_capture(tmp_path / "run.dynscope")
    ran = run_dynscope(["check", str(capture), "--allow", str(allow), "--max-graph-breaks", "5"], tmp_path,
                       timeout=30)
    line = one_line_error(ran)
    assert ran.seconds < 20 and ran.out == ""
    expected = {"binary": "is not valid TOML", "fifo": "it is a FIFO", "device": "it is a character device",
                "deep": "nest too deeply", "huge": "is larger than 1 MiB"}[kind]
    assert expected in line, line

