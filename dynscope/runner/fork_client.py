"""The parent's side of the fork server (dynscope/runner/fork_server.py): start it, ask it for
children, learn how they end. This side never imports torch.

One reader thread takes the server's messages as they come (a child's pid, its end); the
parent's calls wait on them. The server lives in a session of its own and ends when this side
closes its socket, or dies: then it kills every child it still has.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dynscope.runner import fork_pool
from dynscope.runner.fork_server import REQUEST_HEADER_BYTES
from dynscope.runner.interpreter import child_environment, module_command
from dynscope.runner.spec import check_extension_name

CHILD_MODULE = "dynscope.runner.child"  # what a recording child runs
__all__ = ["CHILD_MODULE", "ForkServer", "ForkedChild", "ForkedProcess", "ServerGone", "ServerState", "module_command"]


class ServerGone(OSError):
    """The fork server died or cannot fork: start another, or fresh processes."""


@dataclass(frozen=True)
class ServerState:
    ready: bool  # it forks children (else: fresh processes)
    why: str
    gpu: bool  # a GPU is present: each forked child creates its own CUDA context


@dataclass(frozen=True)
class ForkedChild:
    id: str
    pid: int
    requested_at: float  # time.time() when the parent asked for it


class ForkServer:
    """One fork server process. ``preload``: modules of dynscope it imports (and prepares, see
    fork_server.PREPARE_HOOK) before its first fork."""

    def __init__(self, log_fd: int, preload: Sequence[str] = (), *, command: Sequence[str] | None = None,
                 cwd: str | None = None) -> None:
        """``command``: the server's command line before its socket's number (tests start a
        stand-in that imports no torch). ``cwd``: the directory it works in (None: this one)."""
        names = [check_extension_name(name) for name in preload]
        # Under the test suite's warm pool (a test-only setting): a server forked from it.
        pooled = fork_pool.connect(log_fd, names, cwd=cwd) if command is None else None
        if pooled is not None:
            self._attach(pooled.sock, None, pooled.pid)
            return
        ours, theirs = socket.socketpair()
        start = list(command) if command is not None else module_command("dynscope.runner.fork_server")
        try:
            proc = subprocess.Popen([*start, str(theirs.fileno()), *names], pass_fds=[theirs.fileno()], cwd=cwd,
                                    env=child_environment(), stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._attach(ours, proc, proc.pid)

    @classmethod
    def from_pool(cls, log_fd: int, preload: Sequence[str] = ()) -> ForkServer | None:
        """A server forked from the test suite's warm pool; None where there is none (or it refused)."""
        pooled = fork_pool.connect(log_fd, [check_extension_name(name) for name in preload])
        if pooled is None:
            return None
        server = cls.__new__(cls)
        server._attach(pooled.sock, None, pooled.pid)
        return server

    def _attach(self, sock: socket.socket, proc: subprocess.Popen[bytes] | None, pid: int) -> None:
        self._sock = sock
        self.proc = proc  # the server process we started (None: the pool's)
        self.pid = pid
        self._changed = threading.Condition()
        self.state: ServerState | None = None
        self._pids: dict[str, int] = {}
        self._errors: dict[str, str] = {}
        self._ended: dict[str, int] = {}
        self._gone = False
        self._next_id = 0
        threading.Thread(target=self._read, args=(sock.makefile("rb"),), name="dynscope-fork-server",
                         daemon=True).start()

    # -- asking ------------------------------------------------------------------------------

    def wait_ready(self, timeout: float) -> ServerState | None:
        """Its answer once it has imported torch; None if it has not answered within ``timeout``."""
        with self._changed:
            self._changed.wait_for(lambda: self.state is not None or self._gone, timeout=max(0.0, timeout))
            if self.state is None and self._gone:
                raise ServerGone("the fork server ended before it was ready")
            return self.state

    def spawn(self, module: str, argument: str, *, stdin: int, stdout: int, stderr: int, cwd: str | None = None,
              sys_path0: str | None = None, timeout: float = 60.0) -> ForkedChild:
        """A forked child running ``module.main()`` with ``sys.argv[1] == argument`` on these
        descriptors (the server gets copies; the caller keeps and closes its own). ``sys_path0``:
        what ``python -m`` would have put first on sys.path (the directory it started in)."""
        state = self.wait_ready(timeout)
        if state is None or not state.ready:
            raise ServerGone(state.why if state is not None else "the fork server is not ready")
        self._next_id += 1
        request_id = str(self._next_id)
        requested_at = time.time()
        request = {"op": "spawn", "id": request_id, "module": check_extension_name(module), "argument": argument,
                   "cwd": cwd, "sys_path0": sys_path0}
        body = json.dumps(request).encode()
        try:
            # A length first, with the descriptors; then the request, however large (a ChildSpec can
            # carry the changed source of a --patch): the socket is a stream, not one message per send.
            socket.send_fds(self._sock, [len(body).to_bytes(REQUEST_HEADER_BYTES, "big")], [stdin, stdout, stderr])
            self._sock.sendall(body)
        except OSError as e:
            raise ServerGone(f"the fork server is gone: {e}") from None
        with self._changed:
            self._changed.wait_for(lambda: request_id in self._pids or request_id in self._errors or self._gone,
                                   timeout=timeout)
            if request_id in self._pids:
                return ForkedChild(request_id, self._pids[request_id], requested_at)
            if request_id in self._errors:
                raise ValueError(f"the fork server refused: {self._errors[request_id]}")
        raise ServerGone("the fork server did not answer")

    def returncode(self, child: ForkedChild) -> int | None:
        """How it ended (negative: the signal that killed it), or None while it runs."""
        with self._changed:
            if child.id in self._ended:
                return self._ended[child.id]
            if not self._gone:
                return None
        # The server died (its end killed its children; a crash leaves them orphans): none runs on.
        self.kill(child)
        with self._changed:
            return self._ended.setdefault(child.id, -signal.SIGKILL)

    def wait(self, child: ForkedChild, timeout: float | None = None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: child.id in self._ended or self._gone, timeout=timeout)
        return self.returncode(child)

    def kill(self, child: ForkedChild) -> None:
        """SIGKILL to its process group (its session: the child and all it started)."""
        for kill in (os.killpg, os.kill):
            try:
                kill(child.pid, signal.SIGKILL)
            except OSError:
                pass

    @property
    def alive(self) -> bool:
        return not self._gone and (self.proc is None or self.proc.poll() is None)

    def close(self) -> None:
        """End it: with its socket closed it kills every child it still has and exits at once."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        if self.proc is None:
            return  # the pool's: it ends by itself on seeing the socket closed, and the pool reaps it
        for ending in (signal.SIGTERM, signal.SIGKILL):
            try:
                self.proc.wait(timeout=2.0)
                return
            except subprocess.TimeoutExpired:  # still importing torch: it reads nothing yet
                self.proc.send_signal(ending)
        self.proc.wait()

    # -- the reader thread -------------------------------------------------------------------

    def _read(self, lines: Any) -> None:
        try:
            for line in lines:
                message = json.loads(line)
                with self._changed:
                    self._take(message)
                    self._changed.notify_all()
        except (OSError, ValueError):
            pass
        finally:
            with self._changed:
                self._gone = True
                self._changed.notify_all()

    def _take(self, message: dict[str, Any]) -> None:
        if "ready" in message:
            self.state = ServerState(bool(message["ready"]), str(message.get("why", "")), bool(message.get("gpu")))
        elif "pid" in message:
            self._pids[str(message["id"])] = int(message["pid"])
        elif "returncode" in message:
            self._ended[str(message["id"])] = int(message["returncode"])
        elif "error" in message:
            self._errors[str(message["id"])] = str(message["error"])


class ForkedProcess:
    """A forked child seen the way ``subprocess.Popen`` shows a process (what the launcher and its
    callers use of it), with the server it was forked from, which ``close()`` ends."""

    def __init__(self, server: ForkServer, child: ForkedChild) -> None:
        self.server = server
        self.child = child
        self.pid = child.pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.returncode(self.child)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.server.wait(self.child, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0.0)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signum)
            except OSError:
                pass

    def kill(self) -> None:
        self.server.kill(self.child)

    def close(self) -> None:
        self.server.close()
