"""Issue 20, items 10-12: the pytest plugin's captures, signals to `explain`, child processes.

Real runs: pytest sessions through pytester and `python -m dynscope explain` on tiny programs,
all compiling with backend="eager".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_dynscope

from dynscope.model import Capture

# How dynscope starts, signals and ends the program is the subject here: no warm fork pool (conftest.py).
pytestmark = pytest.mark.usefixtures("no_fork_pool")

PARAMETRIZED = '''
import pytest
import torch


def breaks(x):
    x = x + 1
    print("logging")
    return x * 2


def clean(x):
    return (x + 1) * 2


@pytest.mark.dynscope(max_graph_breaks=0)
@pytest.mark.parametrize("case", ["a b", "a_b"])
def test_case(case):
    torch.compile(breaks if case == "a b" else clean, backend="eager")(torch.ones(3))
'''


def test_ids_that_sanitize_alike_keep_their_own_captures_and_verdicts_under_xdist(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_ids=PARAMETRIZED)
    keep = pytester.path / "captures"
    result = pytester.runpytest_subprocess("-n", "2", "--dynscope-dir", str(keep), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_ids.py::test_case[[]a b[]]*"])
    assert "test_case[a_b] - " not in result.stdout.str()
    kept = sorted(keep.iterdir())
    assert [p.suffix for p in kept] == [".dynscope", ".dynscope"]  # no lock, WAL or probe file left
    breaks = {}
    for path in kept:
        with Capture.open(str(path)) as capture:
            breaks[capture.run.command[-1]] = len(capture.graph_breaks())
    assert breaks == {"test_ids.py::test_case[a b]": 1, "test_ids.py::test_case[a_b]": 0}


def _read_only_dir(tmp_path: Path) -> str:
    if os.geteuid() == 0:  # root writes through mode bits; /proc/self is read-only for it too
        return "/proc/self"
    path = tmp_path / "read-only"
    path.mkdir()
    path.chmod(0o555)
    return str(path)


@pytest.mark.parametrize("kind", ["file", "read-only", "under a file"])
def test_a_bad_dynscope_dir_is_one_usage_error_at_session_start(pytester, tmp_path, kind):
    pytester.makepyfile(test_plain="def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    (tmp_path / "a-file").write_text("keep me")
    bad = {"file": str(tmp_path / "a-file"), "read-only": _read_only_dir(tmp_path),
           "under a file": str(tmp_path / "a-file" / "sub")}[kind]
    started = time.monotonic()
    result = pytester.runpytest_subprocess("--dynscope-dir", bad, "-p", "no:cacheprovider")
    assert time.monotonic() - started < 60
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: --dynscope-dir {bad}: ")
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert (tmp_path / "a-file").read_text() == "keep me"


PROGRAMS = Path(__file__).parent.parent / "programs"


def _interrupt(argv: list[str], target: str) -> tuple[subprocess.CompletedProcess, float]:
    """Start ``argv`` in a session of its own whose controlling terminal is a new pseudo-terminal,
    wait until the program is ready, then send SIGINT: to its PID, to its whole process group, or
    as a terminal does when Ctrl-C is typed (the line discipline signals the foreground group)."""
    import fcntl
    import termios

    def foreground_job() -> None:
        # As a shell starts a foreground job: SIGINT at its default, whatever the test runner's is
        # (a process that ignores SIGINT hands that on, and python then never raises KeyboardInterrupt).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    terminal, tty = os.openpty()
    proc = subprocess.Popen(argv, stdin=tty, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=foreground_job)
    os.close(tty)
    try:
        assert proc.stdout.readline() == "ready\n"
        sent = time.monotonic()
        if target == "terminal":
            os.write(terminal, b"\x03")
        elif target == "group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGINT)
        if target == "pid twice":  # the second while the program handles the first
            time.sleep(1)
            os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        return subprocess.CompletedProcess(argv, proc.returncode, "ready\n" + out, err), time.monotonic() - sent
    finally:
        os.close(terminal)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("target, interrupts", [("pid", 1), ("group", 1), ("terminal", 1), ("pid twice", 2)])
def test_sigint_raises_keyboard_interrupt_in_the_program_once_per_signal(tmp_path, target, interrupts):
    program = str(PROGRAMS / "interruptible.py")
    capture = tmp_path / "run.dynscope"
    ours, took = _interrupt([sys.executable, "-m", "dynscope", "explain", "-o", str(capture), program], target)
    expected = "".join(f"KeyboardInterrupt {n}\n" for n in range(1, interrupts + 1))
    assert ours.stdout == "ready\n" + expected  # the program's handler ran, once per SIGINT
    assert ours.returncode == -signal.SIGINT  # died of SIGINT like python: a shell shows exit 130
    assert "Traceback" in ours.stderr and "\nKeyboardInterrupt\n" in ours.stderr, ours.stderr  # its traceback
    assert took < 30
    with Capture.open(str(capture)) as recorded:
        assert recorded.exception.type == "KeyboardInterrupt" and recorded.run.signal == signal.SIGINT
    if target == "pid":  # what plain python does with the same signal
        plain, _ = _interrupt([sys.executable, program], target)
        assert (plain.returncode, plain.stdout) == (ours.returncode, ours.stdout)


@pytest.mark.parametrize("how", ["os.fork", "fork", "spawn"])
def test_compiles_in_child_processes_get_captures_of_their_own_named_in_the_summary(tmp_path, how):
    root = tmp_path / "run.dynscope"
    result = run_dynscope("explain", "-o", str(root), str(PROGRAMS / "compiles_in_children.py"), how, cwd=tmp_path,
                          input="", timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"
    children = sorted(p.name for p in tmp_path.iterdir() if p.name != "run.dynscope")
    # One capture for the child that compiled, none for the idle one; no WAL, lock or temp file left.
    assert len(children) == 1 and children[0].startswith("run.pid") and children[0].endswith(".dynscope")
    child_pid = int(children[0][len("run.pid"):-len(".dynscope")])
    assert f"compiled nothing in this process; 1 child process compiled: see {children[0]}" in result.stderr
    assert "Was the compiled function called" not in result.stderr
    with Capture.open(str(root)) as program, Capture.open(str(tmp_path / children[0])) as child:
        assert program.compiles() == []
        assert [(c.file, c.pid, c.compiles) for c in program.run.child_captures] == [(children[0], child_pid, 1)]
        assert len(child.compiles()) == 1 and child.run.pid == child_pid
        assert child.run.parent_pid == program.run.pid  # the program's process started it
        assert child.run.command == program.run.command
    summary = run_dynscope("summary", str(tmp_path / children[0]))
    assert summary.returncode == 0 and f"child process {child_pid} of {program.run.pid}" in summary.stdout


def test_a_test_whose_capture_another_run_is_writing_fails_with_one_line(pytester):
    """Another process holds the writer's lock on the test's capture (a second session on the
    same directory, ``--dist each``): the test fails with one line; the file is left alone."""
    import fcntl

    from dynscope.pytest_plugin import capture_file_name

    pytester.makepyfile(test_held="def test_held(dynscope_capture):\n    pass\n")
    keep = pytester.path / "captures"
    keep.mkdir()
    capture = keep / capture_file_name("test_held.py::test_held")
    capture.write_bytes(b"the other run's capture")
    with open(str(capture) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write("4242")
        lock.flush()
        result = pytester.runpytest_subprocess("--dynscope-dir", str(keep), "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*dynscope: another dynscope run (pid 4242) is writing*test_held*"])
    assert "Traceback" not in result.stdout.str()
    assert capture.read_bytes() == b"the other run's capture"
