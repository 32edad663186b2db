"""`dynscope explain` runs a program exactly as python would, and never loses the capture."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_dynscope

from dynscope.model import Capture

# How dynscope starts, signals and ends the program is the subject here: no warm fork pool (conftest.py).
pytestmark = pytest.mark.usefixtures("no_fork_pool")

PROGRAMS = Path(__file__).parent.parent / "programs"
BEHAVES = str(PROGRAMS / "behaves_like_python.py")


def plain_python(*args: str, cwd=None, input: str | None = None) -> subprocess.CompletedProcess:
    # The same environment run_dynscope passes (os.environ: the C-level environment of a pytest
    # process can hold more, e.g. COLUMNS and LINES set by a terminal library).
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, input=input, timeout=300,
                          env=dict(os.environ))


def test_program_sees_what_python_gives_it(tmp_path):
    args = [BEHAVES, "first", "--second", "x y"]
    plain = plain_python(*args, cwd=tmp_path, input="hello\n")
    ours = run_dynscope("explain", "-q", "-o", str(tmp_path / "run.dynscope"), *args, cwd=tmp_path, input="hello\n")
    assert ours.returncode == plain.returncode == 0
    assert ours.stdout == plain.stdout  # same stdout, byte for byte: argv, __name__, sys.path[0], cwd, stdin
    assert "name=__main__" in ours.stdout and "stdin=hello" in ours.stdout
    assert (tmp_path / "run.dynscope").exists()


def test_example_output_is_unchanged_and_summary_goes_to_stderr(tmp_path):
    script = str(EXAMPLES / "graph_breaks.py")
    plain = plain_python(script, "--backend", "eager", cwd=tmp_path)
    ours = run_dynscope("explain", script, "--backend", "eager", cwd=tmp_path)
    assert ours.returncode == plain.returncode == 0
    assert ours.stdout == plain.stdout
    assert "4 graph breaks" in ours.stderr and "Failed to trace builtin operator" in ours.stderr
    captures = list(tmp_path.glob("graph_breaks-*.dynscope"))
    assert len(captures) == 1 and captures[0].name in ours.stderr
    assert "caches were off" not in ours.stderr  # the caches as the user has them (explain --cold turns them off)


@pytest.mark.parametrize("code", [0, 3, 42])
def test_sys_exit_code_is_returned(tmp_path, code):
    result = run_dynscope("explain", "-q", "-o", str(tmp_path / "r.dynscope"), BEHAVES, "--exit", str(code), input="")
    assert result.returncode == code
    assert Capture.open(str(tmp_path / "r.dynscope")).run.exit_code == code


def test_uncaught_exception_prints_the_users_traceback_and_is_recorded(tmp_path):
    path = tmp_path / "r.dynscope"
    plain = plain_python(BEHAVES, "--raise", input="")
    ours = run_dynscope("explain", "-q", "-o", str(path), BEHAVES, "--raise", input="")
    assert ours.returncode == plain.returncode == 1
    # Byte for byte what python prints (torch's own import warnings included, where it has any).
    assert ours.stderr == plain.stderr
    traceback = ours.stderr[ours.stderr.index("Traceback (most recent call last):"):]
    assert 'behaves_like_python.py", line' in traceback
    assert traceback.rstrip().endswith("ValueError: the program failed on purpose")
    assert "dynscope" not in traceback  # none of our frames in it
    capture = Capture.open(str(path))
    assert capture.exception.type == "ValueError" and "on purpose" in capture.exception.message
    assert capture.run.exit_code == 1 and len(capture.compiles()) == 1


def test_os_exit_still_leaves_a_capture_and_a_summary(tmp_path):
    path = tmp_path / "r.dynscope"
    result = run_dynscope("explain", "-o", str(path), BEHAVES, "--os-exit", "5", input="")
    assert result.returncode == 5
    assert "exit 5" in result.stderr
    capture = Capture.open(str(path))
    assert [c.status for c in capture.compiles()] == ["ok"]
    assert capture.run.exit_code == 5


def test_run_module_like_python_dash_m(tmp_path):
    plain = plain_python("-m", "modprog", "a", "--b", cwd=PROGRAMS)
    ours = run_dynscope("explain", "-q", "-o", str(tmp_path / "m.dynscope"), "-m", "modprog", "a", "--b", cwd=PROGRAMS)
    assert ours.returncode == plain.returncode == 0
    assert ours.stdout == plain.stdout == "module=__main__ argv=['a', '--b']\n"


def _wait_for(path: Path, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        assert time.time() < deadline, "the program never reached its second compile"
        time.sleep(0.2)


def test_sigkill_of_everything_during_compilation_leaves_a_readable_capture(tmp_path):
    """Kill the launcher and the program at once (SIGKILL, no chance to clean up)."""
    path, marker = tmp_path / "killed.dynscope", tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dynscope", "explain", "-q", "-o", str(path), str(PROGRAMS / "stuck_in_compile.py"), str(marker)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        _wait_for(marker)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    capture = Capture.open(str(path))
    compiles = capture.compiles()
    assert [c.status for c in compiles] == ["ok", "incomplete"]
    # Everything recorded before the kill is there, the second compile's Dynamo graph included.
    dynamo = capture.stage(compiles[1].compile_id, "dynamo")
    assert dynamo.recorded and "sin" in capture.stage_text(dynamo)
    assert not capture.run.ended  # and the model knows the run never finished


def test_sigkill_of_the_program_is_reported_and_mirrored(tmp_path):
    """Kill only the program: dynscope records the signal, summarizes, and dies the same way."""
    path, marker = tmp_path / "killed.dynscope", tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dynscope", "explain", "-o", str(path), str(PROGRAMS / "stuck_in_compile.py"), str(marker)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait_for(marker)
        child = _child_of(proc.pid)
        os.kill(child, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert stdout == "first compile done\n"
    assert "killed by signal 9" in stderr
    capture = Capture.open(str(path))
    assert capture.run.signal == signal.SIGKILL and capture.run.ended
    assert [c.status for c in capture.compiles()] == ["ok", "incomplete"]


def _child_of(pid: int) -> int:
    for _ in range(100):
        children = Path(f"/proc/{pid}/task/{pid}/children")
        if children.exists() and children.read_text().split():
            return int(children.read_text().split()[0])
        time.sleep(0.1)
    raise AssertionError("no child process")


@pytest.mark.parametrize(
    "args, expected",
    [
        (["explain", "no_such_script.py"], "cannot run no_such_script.py: no such file"),
        (["explain", "{dir}"], "is a directory with no __main__.py"),
        (["explain", "{syntax}"], "syntax error at line 2"),
        (["explain"], "explain needs a script to run"),
        (["summary", "{not_capture}"], "is not a dynscope capture (not an SQLite database)"),
        (["summary", "{missing}"], "no such capture"),
        (["summary", "{sqlite}"], "is an SQLite database but not a dynscope capture"),
    ],
)
def test_bad_input_gets_one_clear_line(tmp_path, args, expected):
    (tmp_path / "dir").mkdir()
    (tmp_path / "bad.py").write_text("print('ok')\nif True print('no')\n")
    (tmp_path / "notes.txt").write_text("not a capture\n")
    import sqlite3

    sqlite3.connect(tmp_path / "other.db").execute("create table t(x)").connection.commit()
    values = {"dir": tmp_path / "dir", "syntax": tmp_path / "bad.py", "not_capture": tmp_path / "notes.txt",
              "missing": tmp_path / "nope.dynscope", "sqlite": tmp_path / "other.db"}
    result = run_dynscope(*[a.format(**values) for a in args], cwd=tmp_path)
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("dynscope: ")
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_refuses_to_overwrite_a_file_that_is_not_a_capture(tmp_path):
    precious = tmp_path / "train.py"
    precious.write_text("print('my work')\n")
    result = run_dynscope("explain", "-o", str(precious), BEHAVES, input="")
    assert result.returncode != 0 and "refusing to overwrite" in result.stderr
    assert precious.read_text() == "print('my work')\n"


def test_compile_error_is_explained_and_the_program_fails_as_it_would(tmp_path):
    path = tmp_path / "err.dynscope"
    result = run_dynscope("explain", "-o", str(path), str(PROGRAMS / "compile_error.py"))
    assert result.returncode == 1
    assert "Compile errors (1)" in result.stderr and "this backend cannot compile anything" in result.stderr
    capture = Capture.open(str(path))
    (error,) = capture.errors()
    assert error.fail_type == "BackendCompilerFailed" and error.function == "f"
    assert [c.status for c in capture.compiles()] == ["failed"]
    assert capture.exception.type == "BackendCompilerFailed"
    missing = {s.key: s.missing_reason for s in capture.stages(error.compile_id) if not s.recorded}
    assert "compile failed (BackendCompilerFailed)" in missing["aot_joint"]


@pytest.mark.parametrize("how", [["program_view.py"], ["-m", "program_view"]], ids=["script", "module"])
def test_program_view_of_itself_matches_python_field_by_field(tmp_path, how):
    """A script given by a relative path (or run with -m), which changes directory and opens a
    file next to itself: __file__, code filenames, sys.argv, sys.path[0], __builtins__,
    __loader__, __spec__, sys.flags, the environment (no TORCHINDUCTOR_CACHE_DIR of ours) and
    stdout's buffering, as python has them."""
    args = [*how, "a", "b c"]
    plain = plain_python(*args, cwd=PROGRAMS, input="")
    ours = run_dynscope("explain", "-q", "-o", str(tmp_path / "v.dynscope"), *args, cwd=PROGRAMS, input="")
    assert plain.returncode == 0, plain.stderr
    assert ours.returncode == 0, ours.stderr
    python, dynscope = json.loads(plain.stdout), json.loads(ours.stdout)
    assert python["before.__file__"] == str(PROGRAMS / "program_view.py") and python["before.found_itself"]
    for when in ("before", "after"):
        for env in (python, dynscope):
            env[f"{when}.environ"].pop("_", None)  # the shell's name of the command it ran
            env[f"{when}.__spec__"] = re.sub(r" at 0x[0-9a-f]+", "", env[f"{when}.__spec__"])  # object ids
    # dynscope imported torch's compiler before the program started, so the filters that
    # importing it adds are there from the start (python has them after the first compile).
    assert dynscope.pop("before.warnings_filters") == python["after.warnings_filters"]
    python.pop("before.warnings_filters")
    assert sorted(dynscope) == sorted(python)
    for key in sorted(python):
        assert dynscope[key] == python[key], key
