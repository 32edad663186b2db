"""The test suite's warm fork pool (dynscope/runner/fork_pool.py), without torch: a stand-in pool
runs the real accept loop and the real copy set-up, and each copy serves its parent with the real
serving loop (fork_server._Server), minus the import of torch. What its copies fork runs in the
parent's directory, environment and umask; what it would not fork as a fresh server would, it
refuses, and the parent starts a server of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_fork_server import alive

from dynscope.runner.fork_client import ForkServer
from dynscope.runner.fork_pool import POOL_ENV, Hello, copy_environment, refusal
from dynscope.runner.interpreter import interpreter_flags
from dynscope.runner.launcher import launch
from dynscope.runner.program import Program
from dynscope.runner.spec import ChildSpec

# The stand-in pool: its copies serve with a stand-in of fork_server.serve_parent (no torch), whose
# children are dynscope._t.echo (what a fresh process would see of its place) and, standing in
# for the recording child, dynscope.runner.child (the spec it was given, and exit 7).
_POOL = r"""
import json, os, socket, sys, types
def module(name, main):
    m = types.ModuleType(name); m.main = main; sys.modules[name] = m
def echo():
    mask = os.umask(0); os.umask(mask)
    print(json.dumps({"ppid": os.getppid(), "sid": os.getsid(0), "cwd": os.getcwd(), "umask": mask,
                      "mine": os.environ.get("PYTEST_MINE"), "nvml": os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"),
                      "rank": os.environ.get("RANK"), "threads": threads}),
          flush=True)
def child():
    print(sys.argv[1], flush=True)
    sys.exit(7)
module("dynscope._t.echo", echo)
module("dynscope.runner.child", child)
from dynscope.runner import fork_pool
from dynscope.runner.fork_server import _Server
def serve_parent(sock, preload, nvml_check):
    server = _Server(sock, nvml_check)
    sock.sendall(json.dumps({"ready": True, "why": "stand-in " + ",".join(preload), "gpu": False}).encode() + b"\n")
    server.serve()
fork_pool.serve_parent = serve_parent
threads = None
def set_intra_op_threads(count):  # torch.set_num_threads, without torch
    global threads
    threads = count
fork_pool.set_intra_op_threads = set_intra_op_threads
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(8)
fork_pool._Pool(listener, dict(os.environ)).serve()
"""


class StandInPool:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(mode=0o700)
        self.address = str(directory / "pool.sock")
        self.log = directory / "pool.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-c", _POOL, self.address], stdin=subprocess.PIPE,
                                         stdout=log, stderr=log, start_new_session=True)
        deadline = time.time() + 30
        while not os.path.exists(self.address):
            assert time.time() < deadline and self.proc.poll() is None, self.log.read_text()
            time.sleep(0.02)

    def end(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=30)


@pytest.fixture
def pool(tmp_path, monkeypatch):
    # The environment the stand-in starts in is the one it compares with: set the pool's address first.
    monkeypatch.setenv(POOL_ENV, str(tmp_path / "pool" / "pool.sock"))
    monkeypatch.delenv("PYTEST_MINE", raising=False)
    started = StandInPool(tmp_path / "pool")
    yield started
    if started.proc.poll() is None:
        started.end()


@pytest.fixture
def log(tmp_path):
    with open(tmp_path / "server.log", "wb") as f:
        yield f


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.time() + seconds
    while alive(pid):
        if time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_parent_gets_a_server_forked_for_it_that_runs_children_where_and_as_it_would(pool, log, tmp_path,
                                                                                          monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("PYTEST_MINE", "the parent's")  # a name that may differ from the pool's
    previous = os.umask(0o027)
    try:
        server = ForkServer(log.fileno(), preload=("dynscope.fix.apply",))
    finally:
        os.umask(previous)
    try:
        assert server.proc is None and server.pid != pool.proc.pid  # not started here: forked by the pool
        state = server.wait_ready(30)
        assert state is not None and state.ready and state.why == "stand-in dynscope.fix.apply"
        with open(tmp_path / "echo.out", "wb") as out, open(os.devnull, "rb") as devnull:
            child = server.spawn("dynscope._t.echo", "", stdin=devnull.fileno(), stdout=out.fileno(),
                                 stderr=log.fileno())
        assert server.wait(child, timeout=30) == 0
        seen = json.loads((tmp_path / "echo.out").read_text())
        assert seen == {"ppid": server.pid, "sid": child.pid, "cwd": str(work), "umask": 0o027,
                        "mine": "the parent's", "nvml": None,  # the CUDA check is the server's alone, as ever
                        "rank": None, "threads": None}
    finally:
        server.close()
    assert _gone_within(server.pid, 10)  # the parent's socket closed: its server ended, and the pool reaped it
    assert f"forked server {server.pid} for a parent in {work}" in pool.log.read_text()


def test_a_torchrun_rank_gets_a_server_with_its_rank_and_thread_count(pool, log, tmp_path, monkeypatch):
    """torchrun gives each rank RANK and its kind (read when the program starts and joins its group)
    and, for several ranks on one host, OMP_NUM_THREADS=1 (read as torch loads: the copy is told)."""
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    server = ForkServer.from_pool(log.fileno())
    assert server is not None and server.wait_ready(30) is not None
    try:
        with open(tmp_path / "echo.out", "wb") as out, open(os.devnull, "rb") as devnull:
            child = server.spawn("dynscope._t.echo", "", stdin=devnull.fileno(), stdout=out.fileno(),
                                 stderr=log.fileno())
        assert server.wait(child, timeout=30) == 0
    finally:
        server.close()
    seen = json.loads((tmp_path / "echo.out").read_text())
    assert (seen["rank"], seen["threads"]) == ("3", 1)


def test_a_parent_whose_environment_differs_gets_no_server_from_the_pool(pool, log, monkeypatch):
    monkeypatch.setenv("TORCH_LOGS", "+dynamo")  # read while torch imports: the pool's copy would not have it
    assert ForkServer.from_pool(log.fileno()) is None
    deadline = time.time() + 10
    while "refused" not in pool.log.read_text() and time.time() < deadline:
        time.sleep(0.05)
    assert "refused a parent: another environment (TORCH_LOGS)" in pool.log.read_text()


def test_a_pool_others_can_reach_is_not_used(pool, log, tmp_path):
    os.chmod(tmp_path / "pool", 0o755)
    assert ForkServer.from_pool(log.fileno()) is None
    os.chmod(tmp_path / "pool", 0o700)
    assert ForkServer.from_pool(log.fileno()) is not None  # the same pool, private again
    assert "forked server" in pool.log.read_text() and pool.log.read_text().count("forked server") == 1


def test_the_pool_ends_with_its_stdin_and_takes_its_servers_along(pool, log):
    server = ForkServer.from_pool(log.fileno())
    assert server is not None and server.wait_ready(30) is not None
    assert pool.end() == 0
    assert _gone_within(server.pid, 10)


def test_a_launch_under_the_pool_runs_the_child_forked_on_the_descriptors_popen_would_get(pool, tmp_path,
                                                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prog.py").write_text("")
    spec = ChildSpec(Program("script", "prog.py", []), str(tmp_path / "run.dynscope"), ("dynscope", "explain"))
    with open(tmp_path / "program.out", "wb") as out:
        result = launch(spec, popen_kwargs={"stdin": subprocess.DEVNULL, "stdout": out, "stderr": out})
    assert result.returncode == 7 and not result.capture_written  # the stand-in child records nothing
    given = ChildSpec.from_json((tmp_path / "program.out").read_text())
    assert given.program == spec.program and given.sigint_notes_fd is None  # forked: every SIGINT is relayed
    assert "forked server" in pool.log.read_text()


@pytest.mark.parametrize("change, refused", [
    ({}, None),
    ({"env": {"PYTEST_CURRENT_TEST": "another test", "COLUMNS": "200"}}, None),
    ({"env": {"OMP_NUM_THREADS": "1"}}, None),  # told to torch in the copy
    ({"env": {"OMP_NUM_THREADS": "4,2"}}, "another environment (OMP_NUM_THREADS)"),  # OpenMP's nested form
    ({"env": {"OMP_NUM_THREADS": "3"}}, "another environment (OMP_NUM_THREADS)"),  # torch caps it at the cores
    ({"env": {"TORCHINDUCTOR_CACHE_DIR": "/t/c", "RANK": "1", "TORCHELASTIC_RUN_ID": "x"}}, None),  # read later
    ({"env": {"TORCH_LOGS": "+dynamo"}}, "another environment (TORCH_LOGS)"),  # read while torch imports
    ({"flags": ["-O"]}, f"other flags (-O instead of {' '.join(interpreter_flags()) or 'none'})"),
    ({"executable": "/usr/bin/python3.9"}, "another python (/usr/bin/python3.9)"),
    ({"prefix": "/another/venv"}, f"another python ({sys.executable})"),
    ({"executable": os.path.realpath(sys.executable)}, None),  # the same python by another name
])
def test_what_the_pool_refuses(change, refused):
    env = {"PATH": "/usr/bin", "PYTHONPATH": "bench"}
    hello = Hello(change.get("executable", sys.executable), change.get("prefix", sys.prefix),
                  change.get("flags", interpreter_flags()), {**env, **change.get("env", {})},
                  change.get("cwd", "/here"), 0o022, [])
    assert refusal(hello, env=env, cwd="/here") == refused


def test_a_copy_takes_the_parents_values_of_what_may_differ_and_keeps_what_torch_set():
    started = {"PATH": "/usr/bin", "RANK": "0", "PYTEST_XDIST_WORKER": "gw0"}
    current = {**started, "TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor_me"}  # set by torch's import
    parent = {"PATH": "/usr/bin", "PYTEST_CURRENT_TEST": "t", "TRITON_CACHE_DIR": "/c/triton", "OMP_NUM_THREADS": "1"}
    assert copy_environment(current, started, parent) == {
        "PATH": "/usr/bin", "PYTEST_CURRENT_TEST": "t", "TRITON_CACHE_DIR": "/c/triton", "OMP_NUM_THREADS": "1",
        "TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor_me"}  # RANK: the parent has none; gw0: not the parent's


def test_a_relative_pythonpath_is_refused_only_from_another_directory():
    env = {"PYTHONPATH": "bench"}
    hello = Hello(sys.executable, sys.prefix, interpreter_flags(), env, "/elsewhere", 0o022, [])
    assert refusal(hello, env=env, cwd="/here") == "PYTHONPATH is relative to another directory"
    assert refusal(hello, env=env, cwd="/elsewhere") is None
    absolute = {"PYTHONPATH": "/opt/lib"}
    assert refusal(Hello(sys.executable, sys.prefix, hello.flags, absolute, "/elsewhere", 0o022, []), env=absolute,
                   cwd="/here") is None
