"""The fork server's protocol and its children's lot, without torch: a stand-in server runs the real
serving loop (dynscope/runner/fork_server.py's _Server) with nothing imported before it, and
children that are small modules it registers under dynscope.* names. Forking from a server that
imported torch, and on a GPU, is tested in tests/integration/test_fix_forks.py and tests/gpu/."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time

import pytest

from dynscope.runner.fork_client import ForkServer, ServerGone
from dynscope.runner.program import Program
from dynscope.runner.runs import ProgramRuns
from dynscope.runner.spec import ChildSpec

# The stand-in: says it is ready, then serves. Its children: dynscope._t.echo writes its argument,
# its pid, its parent's and its session to stdout; dynscope._t.crash aborts; dynscope._t.sleep
# sleeps; and dynscope.runner.child (in its place) writes the ChildSpec it was given.
_SERVER = r"""
import json, os, socket, sys, time, types
def module(name, main):
    m = types.ModuleType(name); m.main = main; sys.modules[name] = m
def echo():
    print(json.dumps({"argument": sys.argv[1], "pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0),
                      "cwd": os.getcwd(), "path0": sys.path[0], "stdin": sys.stdin.read()}), flush=True)
module("dynscope._t.echo", echo)
module("dynscope._t.crash", os.abort)
module("dynscope._t.sleep", lambda: time.sleep(300))
module("dynscope._t.exit3", lambda: sys.exit(3))
module("dynscope.runner.child", lambda: print(sys.argv[1], flush=True))
from dynscope.runner.fork_server import _Server
sock = socket.socket(fileno=int(sys.argv[1]))
server = _Server(sock, None)  # its signal handlers first, as the real server's
sock.sendall(json.dumps({"ready": True, "why": "stand-in", "gpu": False}).encode() + b"\n")
server.serve()
"""
COMMAND = [sys.executable, "-c", _SERVER]


@pytest.fixture
def log(tmp_path):
    with open(tmp_path / "server.log", "wb") as f:
        yield f


@pytest.fixture
def server(log):
    s = ForkServer(log.fileno(), command=COMMAND)
    yield s
    s.close()


def _files(tmp_path, name):
    return open(tmp_path / f"{name}.out", "wb"), open(tmp_path / f"{name}.err", "wb")


def _spawn(server, tmp_path, module, argument="", name="c", **kwargs):
    out, err = _files(tmp_path, name)
    with out, err, open(os.devnull, "rb") as devnull:
        return server.spawn(module, argument, stdin=devnull.fileno(), stdout=out.fileno(), stderr=err.fileno(), **kwargs)


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_child_per_request_forked_from_the_server_in_a_session_of_its_own(server, tmp_path):
    state = server.wait_ready(60)
    assert state is not None and state.ready and state.why == "stand-in"
    child = _spawn(server, tmp_path, "dynscope._t.echo", "the argument", cwd=str(tmp_path), sys_path0="/first")
    assert server.wait(child, timeout=60) == 0
    seen = json.loads((tmp_path / "c.out").read_text())
    assert seen == {"argument": "the argument", "pid": child.pid, "ppid": server.proc.pid, "sid": child.pid,
                    "cwd": str(tmp_path), "path0": "/first", "stdin": ""}
    second = _spawn(server, tmp_path, "dynscope._t.echo", name="d")
    assert server.wait(second, timeout=60) == 0 and second.pid != child.pid


def test_a_request_larger_than_a_socket_buffer_arrives_whole(server, tmp_path):
    """A ChildSpec carrying the changed source of a --patch: megabytes in one request, then a small one."""
    argument = "x = 1  # a line of changed source\n" * 200_000  # 7 MB
    big = _spawn(server, tmp_path, "dynscope._t.echo", argument, name="big")
    assert server.wait(big, timeout=60) == 0
    assert json.loads((tmp_path / "big.out").read_text())["argument"] == argument
    small = _spawn(server, tmp_path, "dynscope._t.echo", "after it", name="small")
    assert server.wait(small, timeout=60) == 0
    assert json.loads((tmp_path / "small.out").read_text())["argument"] == "after it"


def test_a_crashed_child_is_its_return_code_and_the_next_one_runs(server, tmp_path):
    crashed = _spawn(server, tmp_path, "dynscope._t.crash")
    assert server.wait(crashed, timeout=60) == -signal.SIGABRT
    exited = _spawn(server, tmp_path, "dynscope._t.exit3", name="e")
    assert server.wait(exited, timeout=60) == 3
    again = _spawn(server, tmp_path, "dynscope._t.echo", name="f")
    assert server.wait(again, timeout=60) == 0 and server.alive


def test_a_request_for_a_module_outside_dynscope_is_refused_and_the_server_goes_on(server, tmp_path):
    server.wait_ready(60)
    with pytest.raises(ValueError):
        _spawn(server, tmp_path, "os")
    raw = {"op": "spawn", "id": "x", "module": "os", "argument": ""}  # past the client's own check
    import socket

    from dynscope.runner.fork_server import REQUEST_HEADER_BYTES

    body = json.dumps(raw).encode()
    with open(os.devnull, "rb") as devnull:
        socket.send_fds(server._sock, [len(body).to_bytes(REQUEST_HEADER_BYTES, "big")], [devnull.fileno()] * 3)
        server._sock.sendall(body)
    deadline = time.time() + 30
    while "x" not in server._errors and time.time() < deadline:
        time.sleep(0.02)
    assert "not a dynscope module" in server._errors["x"]
    child = _spawn(server, tmp_path, "dynscope._t.echo")
    assert server.wait(child, timeout=60) == 0


def test_killing_a_child_kills_its_group_and_is_reported(server, tmp_path):
    child = _spawn(server, tmp_path, "dynscope._t.sleep")
    assert server.returncode(child) is None
    server.kill(child)
    assert server.wait(child, timeout=60) == -signal.SIGKILL


@pytest.mark.parametrize("ending", ["close", "SIGTERM", "SIGHUP"])
def test_no_child_outlives_the_server_or_its_parent(log, tmp_path, ending):
    server = ForkServer(log.fileno(), command=COMMAND)
    try:
        child = _spawn(server, tmp_path, "dynscope._t.sleep")
        assert alive(child.pid)
        if ending == "close":
            server.close()
        else:
            os.kill(server.proc.pid, getattr(signal, ending))
        server.proc.wait(timeout=30)
        deadline = time.time() + 10
        while alive(child.pid) and time.time() < deadline:
            time.sleep(0.05)
        assert not alive(child.pid)
    finally:
        server.close()


_PARENT = r"""
import os, signal, sys
from dynscope.runner.fork_client import ForkServer
server = ForkServer(2, command=json.loads(sys.argv[1]))
with open(os.devnull, "rb") as devnull:
    child = server.spawn("dynscope._t.sleep", "", stdin=devnull.fileno(), stdout=2, stderr=2)
print(server.proc.pid, child.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_no_child_outlives_a_parent_killed_with_sigkill():
    import subprocess

    proc = subprocess.run([sys.executable, "-c", "import json\n" + _PARENT, json.dumps(COMMAND)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    server_pid, child_pid = map(int, proc.stdout.split())
    deadline = time.time() + 10
    while (alive(server_pid) or alive(child_pid)) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(child_pid) and not alive(server_pid)


def test_sigint_does_not_end_the_server(server, tmp_path):
    server.wait_ready(60)
    os.kill(server.proc.pid, signal.SIGINT)
    time.sleep(0.3)
    child = _spawn(server, tmp_path, "dynscope._t.echo")
    assert server.wait(child, timeout=60) == 0


def test_a_dead_server_is_replaced_and_the_next_run_goes_on(log, tmp_path):
    runs = ProgramRuns(log.fileno(), server_command=COMMAND)
    spec = ChildSpec(Program("script", "prog.py", []), str(tmp_path / "run.dynscope"), ("dynscope", "explain"))
    try:
        out, err = _files(tmp_path, "first")
        with out, err:
            first = runs.start(spec, stdout=out.fileno(), stderr=err.fileno(), cwd=None, deadline=time.time() + 60)
        assert first is not None and first.forked is not None and runs.poll(first) in (None, 0)
        deadline = time.time() + 30
        while runs.poll(first) is None and time.time() < deadline:
            time.sleep(0.02)
        assert runs.poll(first) == 0
        assert ChildSpec.from_json((tmp_path / "first.out").read_text().strip()) == spec  # the child read the spec
        old = first.forked[0]
        os.kill(old.proc.pid, signal.SIGKILL)  # a run's fault took the server down
        old.proc.wait(timeout=30)
        out, err = _files(tmp_path, "second")
        with out, err:
            second = runs.start(spec, stdout=out.fileno(), stderr=err.fileno(), cwd=None, deadline=time.time() + 60)
        assert second is not None and second.forked is not None and second.forked[0] is not old
        assert runs.replaced == 1 and runs.forking
        while runs.poll(second) is None and time.time() < deadline:
            time.sleep(0.02)
        assert runs.poll(second) == 0
    finally:
        runs.close()


def test_the_runs_share_the_cache_directory_given_unless_their_spec_names_one(log, tmp_path):
    """fix's runs: one private cache directory for all (dynscope.runner.cache_dirs.SharedCacheDir),
    given to every child in its spec."""
    runs = ProgramRuns(log.fileno(), server_command=COMMAND, cache_dir=str(tmp_path / "shared"))
    plain = ChildSpec(Program("script", "prog.py", []), str(tmp_path / "run.dynscope"), ("dynscope", "fix"))
    own = dataclasses.replace(plain, cache_dir=str(tmp_path / "own"))
    try:
        for name, spec in (("plain", plain), ("own", own)):
            out, err = _files(tmp_path, name)
            with out, err:
                run = runs.start(spec, stdout=out.fileno(), stderr=err.fileno(), cwd=None, deadline=time.time() + 60)
            assert run is not None
            deadline = time.time() + 30
            while runs.poll(run) is None and time.time() < deadline:
                time.sleep(0.02)
            assert runs.poll(run) == 0
        assert ChildSpec.from_json((tmp_path / "plain.out").read_text().strip()).cache_dir == str(tmp_path / "shared")
        assert ChildSpec.from_json((tmp_path / "own.out").read_text().strip()).cache_dir == str(tmp_path / "own")
    finally:
        runs.close()


def test_a_server_that_cannot_fork_means_fresh_processes(log, tmp_path):
    refusing = [sys.executable, "-c", "import json, socket, sys\nsock = socket.socket(fileno=int(sys.argv[1]))\n"
                "sock.sendall(json.dumps({'ready': False, 'why': 'no forks here', 'gpu': False}).encode() + b'\\n')"]
    runs = ProgramRuns(log.fileno(), server_command=refusing)
    spec = ChildSpec(Program("script", "prog.py", []), str(tmp_path / "run.dynscope"), ("dynscope",))
    try:
        out, err = _files(tmp_path, "fresh")
        with out, err:
            run = runs.start(spec, stdout=out.fileno(), stderr=err.fileno(), cwd=None, deadline=time.time() + 60)
        assert run is not None and run.proc is not None and run.forked is None
        assert not runs.forking and runs.fresh_why == "no forks here"
        run.proc.kill()
        run.proc.wait(timeout=60)
    finally:
        runs.close()


def test_the_server_answers_within_the_deadline_or_the_run_is_not_started(log, tmp_path):
    slow = [sys.executable, "-c", "import time; time.sleep(60)"]
    runs = ProgramRuns(log.fileno(), server_command=slow)
    spec = ChildSpec(Program("script", "prog.py", []), str(tmp_path / "run.dynscope"), ("dynscope",))
    try:
        started = time.time()
        assert runs.start(spec, stdout=1, stderr=2, cwd=None, deadline=time.time() + 0.5) is None
        assert time.time() - started < 10
    finally:
        runs.close()


def test_a_server_that_dies_before_it_is_ready_is_gone(log):
    server = ForkServer(log.fileno(), command=[sys.executable, "-c", "pass"])
    try:
        with pytest.raises(ServerGone):
            server.wait_ready(60)
    finally:
        server.close()
