"""A warm fork pool for the test suite: one process imports torch once, and every fork server a
test's ``dynscope`` process starts is forked from it instead (a test-only setting, CONTRIBUTING.md).

A fork server (dynscope/runner/fork_server.py) saves each of one parent's runs its own
``import torch``, but every ``dynscope fix`` or ``minify`` still starts a server of its own, and
every ``dynscope explain`` a fresh recording child: the suite does it about 130 times, about 4 s
of CPU each on its 2-core machine. With ``DYNSCOPE_TEST_FORK_POOL`` naming this pool's socket,
the parent connects instead of starting a server; the pool forks a copy of itself that becomes
that parent's fork server on the connection (the same protocol, the same ends: it kills its
children and exits when the parent closes the socket or dies).

The copy must be what a fresh server would have been, so the pool refuses (and the parent starts
its own server) when anything that a fresh server would have read while it imported differs: the
python, its flags, the environment (except the names in ``_IGNORED``, which nothing reads at
import, and in ``_READ_LATER``, which torch reads only when it compiles or joins a process group),
or, where PYTHONPATH holds relative entries, the working directory. The copy takes the parent's
environment, working directory and umask, and logs to the parent's log descriptor.

Only this user reaches it: the socket is in a directory only they can enter (the pool makes it;
the parent checks it), and the pool refuses a peer of another uid (SO_PEERCRED).

    python -m dynscope.runner.fork_pool SOCKET_PATH

runs until its stdin reaches its end (its starter closed it, or died), then kills every copy it
forked (each kills its own children) and exits.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import stat
import struct
import sys
from dataclasses import asdict, dataclass
from typing import NoReturn

from dynscope.runner.fork_server import (
    NVML_CUDA_CHECK,
    REQUEST_HEADER_BYTES,
    prepare_server,
    read_exactly,
    serve_parent,
)
from dynscope.runner.interpreter import interpreter_flags, without_directories

POOL_ENV = "DYNSCOPE_TEST_FORK_POOL"
# Set per worker or test by pytest, xdist and pytest-textual-snapshot, or by the shell; read by
# nothing torch or dynscope imports.
_IGNORED_PREFIX = "PYTEST_"
_IGNORED = frozenset({"TEXTUAL_SNAPSHOT_TEMPDIR", "COLUMNS", "LINES", "_", "PWD", "OLDPWD", NVML_CUDA_CHECK})
# Read when torch compiles or a process group starts, not while torch imports, so a copy that takes
# the parent's values is the server the parent would have started: Inductor's and Triton's cache
# directories (read on each use; every recording child sets them after torch's import already), and
# what torchrun gives each rank (read by init_process_group's env:// rendezvous and by dynscope's
# recorder when the program starts).
_READ_LATER_PREFIX = "TORCHELASTIC_"
_READ_LATER = frozenset({
    "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
})
# OpenMP reads this one when torch's libraries load, and torchrun sets it to 1 for each of several
# ranks on one host. For a parent with 1, a copy calls torch.set_num_threads(1): one thread, as a
# fresh process would have. Other values are refused: torch caps what it reads at the cores it
# finds (OMP_NUM_THREADS=3 gives 2 threads on 2 cores), which set_num_threads would not.
_THREADS = "OMP_NUM_THREADS"
_ONE_THREAD = "1"
_HELLO_TIMEOUT_S = 60.0  # the pool answers once it has imported torch
_MAX_HELLO_BYTES = 1 << 24


@dataclass(frozen=True)
class Hello:
    """What a parent sends on connecting (with its log descriptor): what a fresh server started
    by it would have inherited."""

    executable: str
    prefix: str  # sys.prefix: the environment (a venv's python and its base python are one file)
    flags: list[str]
    env: dict[str, str]
    cwd: str
    umask: int
    preload: list[str]


def refusal(hello: Hello, *, env: dict[str, str], cwd: str) -> str | None:
    """Why a copy of this process, started in ``env`` and ``cwd``, would not be the fresh server
    ``hello``'s parent would start."""
    if os.path.realpath(hello.executable) != os.path.realpath(sys.executable) or hello.prefix != sys.prefix:
        return f"another python ({hello.executable})"
    ours_flags = interpreter_flags()
    if hello.flags != ours_flags:
        return f"other flags ({' '.join(hello.flags) or 'none'} instead of {' '.join(ours_flags) or 'none'})"
    ours, theirs = _compared(env), _compared(hello.env)
    differing = sorted(name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name))
    if _THREADS in differing and theirs.get(_THREADS) == _ONE_THREAD:
        differing.remove(_THREADS)
    if differing:
        return f"another environment ({', '.join(differing[:5])})"
    relative = [p for p in hello.env.get("PYTHONPATH", "").split(os.pathsep) if not os.path.isabs(p)]
    if "PYTHONPATH" in hello.env and relative and os.path.realpath(hello.cwd) != os.path.realpath(cwd):
        return "PYTHONPATH is relative to another directory"
    return None


def _compared(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not _ignored(k) and not _read_later(k)}


def _ignored(name: str) -> bool:
    return name in _IGNORED or name.startswith(_IGNORED_PREFIX)


def _read_later(name: str) -> bool:
    return name in _READ_LATER or name.startswith(_READ_LATER_PREFIX)


def copy_environment(current: dict[str, str], started: dict[str, str], parent: dict[str, str]) -> dict[str, str]:
    """A copy's environment: this process's ``current`` one (what importing torch made of the
    ``started`` one, which equals the parent's where it matters), with the parent's values of the
    names that may differ. A name read later that the parent lacks is dropped, unless torch's import
    set it here, as it would have in a fresh process."""
    env = {k: v for k, v in current.items() if not _ignored(k)}
    env.update({k: v for k, v in parent.items() if _ignored(k) or _read_later(k) or k == _THREADS})
    for name in [k for k in env if (_read_later(k) or k == _THREADS) and k not in parent and k in started]:
        del env[name]
    return env


def set_intra_op_threads(count: int) -> None:
    """The thread count OpenMP would have read from OMP_NUM_THREADS, had torch loaded in this environment."""
    import torch

    torch.set_num_threads(count)


# -- the parent's side ---------------------------------------------------------------------------


def configured() -> bool:
    return bool(os.environ.get(POOL_ENV))


def connect(log_fd: int, preload: list[str], *, cwd: str | None = None) -> Pooled | None:
    """A connection to the pool that ``DYNSCOPE_TEST_FORK_POOL`` names, whose far end is a fork
    server for this process alone (working in ``cwd``, None: this process's directory); None when
    there is no pool, it is not this user's, or it refused."""
    address = os.environ.get(POOL_ENV)
    if not address or not _ours(os.path.dirname(address)) or not _ours(address):
        return None
    hello = Hello(sys.executable, sys.prefix, interpreter_flags(), dict(os.environ),
                  os.path.abspath(cwd) if cwd else os.getcwd(), _current_umask(), list(preload))
    body = json.dumps(asdict(hello)).encode()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(_HELLO_TIMEOUT_S)
        sock.connect(address)
        socket.send_fds(sock, [len(body).to_bytes(REQUEST_HEADER_BYTES, "big")], [log_fd])
        sock.sendall(body)
        answer = json.loads(_first_line(sock))
        sock.settimeout(None)
    except (OSError, ValueError):
        sock.close()
        return None
    if answer.get("accepted") is not True or not isinstance(answer.get("pid"), int):
        sock.close()
        return None
    return Pooled(sock, answer["pid"])


@dataclass(frozen=True)
class Pooled:
    """A connection to a fork server the pool forked for this process, and that server's pid."""

    sock: socket.socket
    pid: int


def _first_line(sock: socket.socket) -> bytes:
    """Up to the first newline and not a byte further: the server's own messages follow it."""
    line = b""
    while not line.endswith(b"\n") and len(line) < 4096:
        byte = sock.recv(1)
        if not byte:
            break
        line += byte
    return line or b"{}"


def _ours(path: str) -> bool:
    """Owned by this user, and nobody else may write to it (or, a directory, enter it)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    private = stat.S_IMODE(st.st_mode) & 0o077 == 0 if stat.S_ISDIR(st.st_mode) else stat.S_ISSOCK(st.st_mode)
    return st.st_uid == os.getuid() and private


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- the pool ------------------------------------------------------------------------------------


class _Pool:
    def __init__(self, listener: socket.socket, started_env: dict[str, str]) -> None:
        self.listener = listener
        self.started_env = started_env  # before importing torch (which sets some variables itself)
        self.copies: set[int] = set()
        self.cwd = os.getcwd()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda *_: self.end())
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for the test session

    def end(self) -> NoReturn:
        for pid in self.copies:  # each copy's SIGTERM handler kills its children first
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        os._exit(0)

    def serve(self) -> NoReturn:
        while True:
            ready, _, _ = select.select([self.listener, sys.stdin], [], [], 0.2)
            if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
                self.end()
            if self.listener in ready:
                conn, _ = self.listener.accept()
                self.take(conn)
            for pid in list(self.copies):
                try:
                    done, _status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid
                if done:
                    self.copies.discard(pid)

    def take(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
            conn.settimeout(_HELLO_TIMEOUT_S)
            header, fds, _flags, _addr = socket.recv_fds(conn, REQUEST_HEADER_BYTES, 1)
            size = int.from_bytes(header, "big") if len(header) == REQUEST_HEADER_BYTES else -1
            if uid != os.getuid() or len(fds) != 1 or not 0 < size <= _MAX_HELLO_BYTES:
                raise ValueError("not this user's parent, or not a hello")
            hello = Hello(**json.loads(read_exactly(conn, size)))
            why = refusal(hello, env=self.started_env, cwd=self.cwd)
            if why is not None:
                conn.sendall(json.dumps({"accepted": False, "why": why}).encode() + b"\n")
                raise ValueError(why)
            conn.settimeout(None)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                self._become_server(conn, fds[0], hello)
            self.copies.add(pid)
            print(f"dynscope fork pool: forked server {pid} for a parent in {hello.cwd}", file=sys.stderr, flush=True)
        except (OSError, EOFError, ValueError, TypeError) as e:
            print(f"dynscope fork pool: refused a parent: {e}", file=sys.stderr, flush=True)
        finally:
            for fd in fds:
                os.close(fd)
            conn.close()

    def _become_server(self, conn: socket.socket, log_fd: int, hello: Hello) -> NoReturn:
        """In the forked copy: be the fresh server ``hello``'s parent would have started."""
        try:
            self.listener.close()
            os.setsid()  # as the parent's start_new_session=True would have made it
            with open(os.devnull, "rb") as devnull:
                os.dup2(devnull.fileno(), 0)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            os.close(log_fd)
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            env = copy_environment(dict(os.environ), self.started_env, hello.env)
            os.environ.clear()
            os.environ.update(env)
            if hello.env.get(_THREADS) == _ONE_THREAD and self.started_env.get(_THREADS) != _ONE_THREAD:
                set_intra_op_threads(1)
            nvml_check = os.environ.get(NVML_CUDA_CHECK)
            os.environ[NVML_CUDA_CHECK] = "1"  # as fork_server.main sets it for itself
            os.chdir(hello.cwd)
            sys.path[:] = without_directories(sys.path, [self.cwd, hello.cwd])  # as module_command starts a server
            os.umask(hello.umask)
            conn.sendall(json.dumps({"accepted": True, "pid": os.getpid()}).encode() + b"\n")
        except BaseException:
            os._exit(1)
        serve_parent(conn, hello.preload, nvml_check)


def main() -> None:
    address = sys.argv[1]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)  # first: a parent that connects while torch imports waits for its answer
    started_env = dict(os.environ)
    os.environ[NVML_CUDA_CHECK] = "1"  # see fork_server.main: no CUDA context before the forks
    prepare_server([])
    print(f"dynscope fork pool: ready on {address}", file=sys.stderr, flush=True)
    _Pool(listener, started_env).serve()


if __name__ == "__main__":
    main()
