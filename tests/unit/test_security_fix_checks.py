"""``dynscope fix`` and what a capture makes it run (issue 20, items 2, 9 and 13), without torch.

``fix --from`` re-runs the command a capture recorded; a capture comes from anyone. Each attack
forges a capture with the real writer, runs the real command in a fresh process, and checks:
the payload's marker file was not created, no raw control byte reached the output, one line and
exit 2, a bounded time, and nothing in the directory changed. Every refusal happens before
anything is run, so no test here needs torch: real fix runs are in
tests/integration/test_security_fix.py.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

import pytest
from hostile_fix import CONTROL, last_rss, marker_program, raw_controls, recorded_capture, run_fix, tree

from dynscope.fix import outdir, scratch
from dynscope.fix.stopping import Stopped, signals_stop_the_run

TIME_BOUND_S = 30  # each refusal: the CLI's start (no torch) and one capture read
RSS_BOUND = 150 * 1024 * 1024  # each refusal, peak: the CLI itself is about 60 MB


def _refused(code: int, output: str, seconds: float, *words: str) -> None:
    assert code == 2, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynscope: "), output
    assert "Traceback" not in output and "internal error" not in output
    assert not raw_controls(output), raw_controls(output)
    assert seconds < TIME_BOUND_S
    assert last_rss and last_rss[0] < RSS_BOUND, last_rss
    for word in words:
        assert word in output, (word, output)


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


# -- item 2: the recorded command is shown, and runs only if the user says so ---------------------------------

ATTACKS = {
    # the issue's: python -m timeit with a statement, an absolute script path, cwd "/"
    "-m timeit in /": lambda d, m: (["-m", "timeit", "-n", "1", f"open({str(m)!r}, 'w')"], "/"),
    "absolute script": lambda d, m: ([str(marker_program(d, m))], "/"),
    "relative script in its directory": lambda d, m: (["evil.py", "--epochs", "1"], str(marker_program(d, m).parent)),
    "-mmodule": lambda d, m: (["-mtimeit", f"open({str(m)!r}, 'w')"], "/"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_without_a_terminal_a_recorded_command_is_refused_unless_yes(tmp_path, work, attack):
    marker = tmp_path / "MARKER"
    argv, cwd = ATTACKS[attack](tmp_path, marker)
    capture = recorded_capture(tmp_path / "bug.dynscope", argv, cwd)
    before = tree(work)
    code, output, seconds = run_fix(["--from", str(capture), "--only", "break"], work)
    _refused(code, output, seconds, "--yes", "no terminal")
    # the exact command and directory are in the refusal, so the user can read what would run
    assert argv[-1].replace("'", "") in output.replace("'", "").replace('"', "")
    assert f"(in {cwd})" in output
    assert not marker.exists() and tree(work) == before  # no output directory either


def test_on_a_terminal_it_asks_and_no_runs_nothing(tmp_path, work):
    marker = tmp_path / "MARKER"
    script = marker_program(tmp_path, marker)
    capture = recorded_capture(tmp_path / "bug.dynscope", [str(script), "--lr", "0.1"], str(tmp_path))
    before = tree(work)
    for answer in (b"n\n", b"\n", b"yes please\n", b"\x04"):  # no, the default, not a yes, end of input
        code, output, seconds = run_fix(["--from", str(capture)], work, answer=answer)
        assert code == 2 and seconds < TIME_BOUND_S, output
        assert "command:   " in output and str(script) in output and "--lr 0.1" in output
        assert f"directory: {tmp_path}" in output and "Run it? [y/N]" in output
        assert output.strip().splitlines()[-1].endswith("dynscope: not run: the recorded command was not confirmed")
        assert "Traceback" not in output
    assert not marker.exists() and tree(work) == before


def test_control_characters_in_the_recorded_command_are_shown_escaped(tmp_path, work):
    marker = tmp_path / "MARKER"
    script = marker_program(tmp_path, marker)
    hostile = "".join(c for c in CONTROL if c != "\0") + "\x1b]0;title\x07\x1b]8;;http://x\x07link\x1b]52;c;ZXZpbA==\x07\u202eevil"
    capture = recorded_capture(tmp_path / "bug.dynscope", [str(script), hostile, "a\nb"], str(tmp_path))
    code, output, seconds = run_fix(["--from", str(capture)], work)
    _refused(code, output, seconds, "\\x1b]0;title\\x07", "\\u202e", "a\\nb")
    code, output, _ = run_fix(["--from", str(capture)], work, answer=b"n\n")
    assert code == 2 and not raw_controls(output) and "\\x1b]52;c;" in output
    assert not marker.exists()


CHECKED = {
    "cwd that does not exist here": (lambda d: (["evil.py"], str(d / "gone")), "does not exist here"),
    "no cwd": (lambda d: (["evil.py"], None), "no absolute working directory"),
    "relative cwd": (lambda d: (["evil.py"], "work"), "no absolute working directory"),
    "NUL in an argument": (lambda d: (["evil.py", "a\0b"], str(d)), "NUL"),
    "NUL in the cwd": (lambda d: (["evil.py"], str(d) + "\0x"), "NUL"),
    "-m without a module": (lambda d: (["-m"], str(d)), "no module name"),
    "-m with an option": (lambda d: (["-m", "-c"], str(d)), "no module name"),
    "-c and code": (lambda d: (["--", "-c", "import os"], str(d)), "option -c"),
    "-c read as an explain option": (lambda d: (["-c", "import os"], str(d)), "No such file"),
    "python itself": (lambda d: ([__import__("sys").executable, "evil.py"], str(d)), "does not record"),
    "empty command": (lambda d: ([], str(d)), "does not record"),
    "script that is a FIFO": (lambda d: (["fifo.py"], str(d)), "not a regular file"),
    "script that is missing": (lambda d: (["missing.py"], str(d)), "No such file"),
    "a command too long to read": (lambda d: (["evil.py", "x" * 100_000], str(d)), "too long to show"),
    "a directory whose __main__.py is a FIFO": (lambda d: (["pkgdir"], str(d)), "not a regular file"),
    "a script too large to be one": (lambda d: (["huge.py"], str(d)), "is no Python script"),
}


@pytest.mark.parametrize("case", sorted(CHECKED))
def test_a_recorded_command_that_cannot_be_shown_or_run_is_one_line(tmp_path, work, case):
    make, words = CHECKED[case]
    marker = tmp_path / "MARKER"
    marker_program(tmp_path, marker)
    os.mkfifo(tmp_path / "fifo.py")  # opening it would block: it must never be opened
    (tmp_path / "pkgdir").mkdir()
    os.mkfifo(tmp_path / "pkgdir" / "__main__.py")
    with open(tmp_path / "huge.py", "wb") as f:  # sparse: 2 GiB that reading and compiling would cost
        f.truncate(2 << 30)
    argv, cwd = make(tmp_path)
    capture = recorded_capture(tmp_path / "bug.dynscope", argv, cwd)
    before = tree(work)
    code, output, seconds = run_fix(["--from", str(capture), "--yes"], work)  # --yes: refused all the same
    _refused(code, output, seconds, words)
    assert not marker.exists() and tree(work) == before


# -- item 13: bad options are one line and exit 2 ---------------------------------------------------------------

def test_bad_options_are_one_line(tmp_path, work):
    (work / "prog.py").write_text("print(1)\n")
    (work / "a-file").write_text("")
    for args, words in ((["--budget", "nan", "prog.py"], "--budget"), (["--budget=-inf", "prog.py"], "--budget"),
                        (["--rtol", "nan", "prog.py"], "--rtol"), (["--yes", "prog.py"], "--yes goes with --from"),
                        (["--out", "a-file", "prog.py"], "not a directory"),
                        (["--out", "a-file/sub", "prog.py"], "cannot use --out")):
        before = tree(work)
        code, output, seconds = run_fix(args, work)
        _refused(code, output, seconds, words)
        assert tree(work) == before, args


def test_outputs_never_replace_a_capture(tmp_path, work):
    marker = tmp_path / "MARKER"
    marker_program(tmp_path, marker)
    capture = recorded_capture(work / "bug.dynscope", ["evil.py"], str(tmp_path))
    other = recorded_capture(work / "other.dynscope", ["evil.py"], str(tmp_path))
    (work / "prog.py").write_text("print(1)\n")
    kept = {p: p.read_bytes() for p in (capture, other)}
    for args in (["--from", "bug.dynscope", "--yes", "-o", "bug.dynscope"],
                 ["--from", "bug.dynscope", "--yes", "--md", str(capture)],
                 ["-o", "other.dynscope", "prog.py"], ["--md", "other.dynscope", "prog.py"]):
        code, output, seconds = run_fix(args, work)
        _refused(code, output, seconds, "refusing to overwrite it")
    assert {p: p.read_bytes() for p in kept} == kept and not marker.exists()


def test_out_is_not_the_working_directory(work):
    (work / "prog.py").write_text("print(1)\n")
    before = tree(work)
    code, output, seconds = run_fix(["--out", ".", "prog.py"], work)
    _refused(code, output, seconds, "is the program's working directory")
    assert tree(work) == before


# -- item 9: two fix runs never share an output directory -------------------------------------------------------

def test_a_second_run_into_the_same_out_directory_is_refused(tmp_path, work):
    (work / "prog.py").write_text("print(1)\n")
    out = work / "out"
    out.mkdir()
    (out / "baseline.dynscope").write_bytes(b"the first run's capture")
    held = outdir.claim(str(out), "prog")  # a first fix run, still running
    try:
        code, output, seconds = run_fix(["--out", "out", "prog.py"], work)
        _refused(code, output, seconds, "another dynscope fix is writing into out")
        assert (out / "baseline.dynscope").read_bytes() == b"the first run's capture"
    finally:
        held.release()
    again = outdir.claim(str(out), "prog")  # free once the first one ended
    again.release()


def test_the_default_out_directory_is_new_for_every_run(work, monkeypatch):
    monkeypatch.chdir(work)
    claimed = [outdir.claim(None, "prog") for _ in range(3)]  # in the same second: -2, -3
    try:
        paths = [c.path for c in claimed]
        assert len(set(paths)) == 3 and all(os.path.isdir(p) and os.path.basename(p).startswith("prog-fix-")
                                            for p in paths)
    finally:
        for c in claimed:
            c.release()


def test_a_lock_file_that_is_a_symlink_is_not_followed(tmp_path, work):
    target = tmp_path / "precious"
    target.write_text("keep me")
    out = work / "out"
    out.mkdir()
    os.symlink(target, out / outdir.LOCK_NAME)
    with pytest.raises(Exception) as raised:
        outdir.claim(str(out), "prog")
    assert "cannot use --out" in str(raised.value)
    assert target.read_text() == "keep me"


# -- item 9: each run in a scratch copy of the working directory ------------------------------------------------

def test_a_scratch_copy_keeps_runs_apart_and_still_sees_the_inputs(tmp_path):
    source = tmp_path / "project"
    (source / "data" / "deep").mkdir(parents=True)
    (source / "runs.log").write_text("one\n")
    (source / "data" / "deep" / "small.txt").write_text("input")
    (source / "big.bin").write_bytes(b"\0" * (scratch.COPY_MAX_BYTES + 1))
    (source / ".git").mkdir()
    (source / "__pycache__").mkdir()
    os.symlink("/etc/hostname", source / "link")
    os.mkfifo(source / "fifo")  # never opened: linked
    (source / "prog-fix-1").mkdir()
    (source / "prog-fix-1" / outdir.LOCK_NAME).write_text("")
    before = tree(source)
    copy = tmp_path / "copy"
    started = time.time()
    scratch.make(str(source), str(copy))
    assert time.time() - started < 10
    assert not (copy / "runs.log").is_symlink() and (copy / "runs.log").read_text() == "one\n"
    assert (copy / "data").is_dir() and not (copy / "data").is_symlink()
    assert (copy / "data" / "deep" / "small.txt").read_text() == "input"
    assert os.readlink(copy / "big.bin") == str(source / "big.bin")  # seen, not copied
    assert os.readlink(copy / ".git") == str(source / ".git") and (copy / "__pycache__").is_symlink()
    assert os.readlink(copy / "link") == str(source / "link") and os.readlink(copy / "fifo") == str(source / "fifo")
    assert not (copy / "prog-fix-1").exists()  # fix's own output is no input
    with open(copy / "runs.log", "a") as f:  # what a run writes stays in its copy
        f.write("two\n")
    (copy / "data" / "new.txt").write_text("made by a run")
    assert tree(source) == before
    scratch.remove(str(copy))
    assert not copy.exists() and tree(source) == before  # links removed, never followed


def test_a_scratch_copy_is_bounded(tmp_path, monkeypatch):
    source = tmp_path / "project"
    (source / "many").mkdir(parents=True)
    for i in range(50):
        (source / "many" / f"{i}.txt").write_text("x")
    monkeypatch.setattr(scratch, "MAX_ENTRIES", 20)
    scratch.make(str(source), str(tmp_path / "copy"))
    assert os.readlink(tmp_path / "copy" / "many") == str(source / "many")  # past the bound: linked whole
    for i in range(30):
        (source / f"top{i}.txt").write_text("x")
    with pytest.raises(scratch.TooLarge):
        scratch.make(str(source), str(tmp_path / "copy2"))
    monkeypatch.setattr(scratch, "MAX_ENTRIES", 10_000)
    monkeypatch.setattr(scratch, "COPY_TOTAL_BYTES", 3)
    scratch.make(str(source), str(tmp_path / "copy3"))
    copied = [p for p in (tmp_path / "copy3").iterdir() if p.is_file() and not p.is_symlink()]
    assert len(copied) == 3  # one byte each, three bytes in all


# -- item 9: a signal stops the run through its cleanup ---------------------------------------------------------

@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_raises_stopped_and_the_cleanup_runs_uninterrupted(name):
    sig = getattr(signal, name)
    before = signal.getsignal(sig)
    cleaned = []
    with pytest.raises(Stopped) as stopped:
        with signals_stop_the_run():
            try:
                os.kill(os.getpid(), sig)
                time.sleep(5)
            finally:
                os.kill(os.getpid(), sig)  # a second signal while cleaning up is ignored
                cleaned.append(True)
    assert cleaned == [True] and stopped.value.exit_code == 128 + sig and stopped.value.name == name
    assert signal.getsignal(sig) == before


def test_an_out_directory_from_elsewhere_cannot_redirect_what_a_run_writes(tmp_path):
    """--out names a directory someone else made: links under a run's names are removed, never
    written through (its capture, its output files, its scratch copy)."""
    from dynscope.fix.trials import TrialRun, _clear, new_file

    out = tmp_path / "out"
    out.mkdir()
    precious = tmp_path / "precious"
    precious.mkdir()
    for name in ("capture", "stdout", "stderr", "log"):
        (precious / name).write_text("keep me")
    (precious / "inside").write_text("keep me")
    for link, target in (("baseline.dynscope", "capture"), ("baseline.stdout", "stdout"),
                         ("baseline.stderr", "stderr"), ("fork-server.log", "log")):
        os.symlink(precious / target, out / link)
    os.symlink(precious, out / "baseline.cwd")
    run = TrialRun("baseline", [], str(out))
    _clear(run)
    with new_file(str(out / "baseline.stdout")) as f:
        f.write(b"the run's output")
    with new_file(str(out / "fork-server.log")) as f:
        f.write(b"the server's log")
    assert {p.name: p.read_text() for p in precious.iterdir()} == dict.fromkeys(
        ("capture", "stdout", "stderr", "log", "inside"), "keep me")
    assert not (out / "baseline.cwd").exists() and not (out / "baseline.dynscope").exists()
    assert (out / "baseline.stdout").read_text() == "the run's output" and not (out / "baseline.stdout").is_symlink()


def test_the_lock_is_released_for_a_later_run(tmp_path):
    out = tmp_path / "out"
    first = outdir.claim(str(out), "prog")
    fd = os.open(out / outdir.LOCK_NAME, os.O_RDWR)
    try:
        with pytest.raises(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        first.release()
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
