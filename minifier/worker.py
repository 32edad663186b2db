"""The parent's side of the check worker: send a request, wait at most so long.

One worker process serves every check. A check that kills the worker (an abort or a
segfault in generated code) or outlives its timeout (a hang) becomes a result, not an
error: the worker is killed with its process group (Inductor's compile subprocesses
included) and the next request goes to a new one.

Where the platform can fork and pass file descriptors (Linux, macOS), workers are forked
from the runner's fork server (dynscope/runner/fork_server.py), which has imported torch and
warmed Inductor up once (minifier/worker_main.py's prepare_fork_server): a replacement costs milliseconds, where a fresh interpreter costs
seconds of imports and first-compile work. With a GPU the server never initializes CUDA (a
process that did cannot fork CUDA users): it imports what a GPU compile needs and proves with
a forked test child that CUDA works after a fork; each worker then creates its own CUDA
context, so that a check that poisons it (a device-side assert) costs a fork and a new
context (about a second), not a fresh interpreter. Where the server cannot promise that, and
on platforms without fork, each worker is a fresh process.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from dynscope.runner.cache_dirs import cache_environment, caches_in
from dynscope.runner.fork_client import ForkServer, module_command
from dynscope.runner.interpreter import child_environment

# How long a worker may take to start and warm up before its first check.
STARTUP_TIMEOUT_S = 600.0


_WORKER_MODULE = "dynscope.minifier.worker_main"
_WORKER = module_command(_WORKER_MODULE)
# A fork server that died (after it had forked workers) is started again this many times.
_SERVER_REPLACEMENTS = 3


@dataclass(frozen=True)
class Reply:
    data: dict[str, Any] | None  # the worker's answer
    crashed: int | None = None  # the worker died: its return code (negative: signal)
    hung_after: float | None = None  # no answer within the timeout
    progress: dict[str, Any] = field(default_factory=dict)  # what it reported before dying


class _Channel:
    """One worker process: where requests go, where replies come from, how it ends."""

    def __init__(self, pid: int, requests: IO[bytes], replies: IO[bytes], reap: Callable[[], int],
                 reap_killed: Callable[[], None]) -> None:
        self.pid = pid
        self.requests = requests
        self.replies = replies
        self.replies_fd = replies.fileno()
        self.reap = reap  # waits for it to end; returns its status as subprocess reports it
        self.reap_killed = reap_killed  # after SIGKILL: must not block
        self.buffer = b""
        self.warming: int | None = None  # id of a warm-up request still running

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        # Never wait for it here: a process killed while its GPU context was broken can take
        # a long time to finish dying in the driver, and nothing needs its status.
        self._close_pipes()
        self.reap_killed()

    def close(self) -> int:
        self._close_pipes()
        return self.reap()

    def _close_pipes(self) -> None:
        for closer in (self.requests.close, self.replies.close):
            try:
                closer()
            except (OSError, ValueError):
                pass


class _ForkedWorkers:
    """Workers forked from the runner's fork server (dynscope/runner/fork_server.py), which
    imports this package's worker and warms Inductor up first (worker_main.prepare_fork_server)."""

    def __init__(self, log: IO[bytes], cwd: str, cache_dir: str | None) -> None:
        self.log_fd = log.fileno()
        with caches_in(cache_dir):  # the server's warm-up, and every worker it forks, compile there
            self.server = ForkServer(self.log_fd, preload=(_WORKER_MODULE,), cwd=cwd)
        self.ready = False
        self.gpu = False  # a GPU is present: each forked worker creates its own CUDA context

    def spawn(self) -> _Channel:
        if not self.ready:  # its warm-up runs while the program does; wait for it here
            state = self.server.wait_ready(STARTUP_TIMEOUT_S)
            if state is None or not state.ready:
                raise OSError(f"the fork server cannot fork workers here: {state.why if state else 'no answer'}")
            self.ready, self.gpu = True, state.gpu
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        try:
            child = self.server.spawn(_WORKER_MODULE, "", stdin=request_read, stdout=reply_write, stderr=self.log_fd)
        except BaseException:
            os.close(request_write)
            os.close(reply_read)
            raise
        finally:
            os.close(request_read)
            os.close(reply_write)

        def reap() -> int:
            code = self.server.wait(child, timeout=60)
            return -signal.SIGKILL if code is None else code

        # The server reaps its children itself: a killed one needs nothing from here.
        return _Channel(child.pid, os.fdopen(request_write, "wb"), os.fdopen(reply_read, "rb", buffering=0),
                        reap, lambda: None)

    def close(self) -> None:
        self.server.close()


def _can_fork_workers() -> bool:
    """Forking needs fork and fd passing. A GPU is no obstacle: the fork server creates no
    CUDA context, and says so before the first fork (it answers "not ready" otherwise, and the
    workers are fresh processes then)."""
    return hasattr(os, "fork") and hasattr(socket, "send_fds")


class Worker:
    """``spare``: keep a second worker ready, warmed up while the current one checks, to take
    over when a check ends the current one. By default only once checks use CUDA (where a
    fork is cheap but a new CUDA context is not, a fresh process costlier still, and every
    check that hits a device-side assert ends its worker). ``cache_dir``: the directory of
    every worker's compile caches (minify's private one, dynscope.runner.cache_dirs); None:
    the environment's."""

    def __init__(self, log_path: str, *, fork: bool | None = None, spare: bool | None = None,
                 cache_dir: str | None = None) -> None:
        self.log_path = log_path
        self.cache_dir = cache_dir
        # Workers (and their fork server) work in the output directory, a directory of ours: torch
        # starts `python -c` probes (Inductor's dlopen check) in its working directory, where a
        # stranger's capture may have come with a ctypes.py.
        self._cwd = os.path.dirname(os.path.abspath(log_path))
        self.fork = _can_fork_workers() if fork is None else fork
        self.spare = spare
        self.started = 0  # worker processes started so far (spares once they serve)
        self._log: IO[bytes] | None = None
        self._server: _ForkedWorkers | None = None
        self._replacements = 0  # fork servers started again after one died
        self._channel: _Channel | None = None
        self._spare: _Channel | None = None
        self._uses_cuda = False  # a check has used CUDA in its worker
        self._next_id = 0

    def start(self) -> None:
        """Start warming up now (torch's import, Inductor's first compile), in the background."""
        if self._log is None:
            self._log = open(self.log_path, "ab")
        if self.fork and self._server is None:
            self._server = _ForkedWorkers(self._log, self._cwd, self.cache_dir)
        elif not self.fork and self._channel is None and self.started == 0:
            self._channel = self._spawn_plain(warm_up=True)
            self.started += 1

    def request(self, request: dict[str, Any], timeout: float) -> Reply:
        channel = self._ensure_channel()
        for _ in range(3):  # let a warm-up finish first: its time is not the check's
            if channel.warming is None:
                break
            warm = self._receive(channel, channel.warming, STARTUP_TIMEOUT_S)
            channel.warming = None
            if warm.data is None:  # it died warming up: the next one
                self._channel = None
                channel = self._ensure_channel()
        reply = self._receive(channel, self._send(channel, request), timeout)
        if reply.data is not None and reply.data.get("cuda"):
            self._uses_cuda = True
        if reply.data is not None and reply.data.get("restart"):
            channel.kill()  # its state cannot be trusted any more
        if reply.data is None or reply.data.get("restart"):
            self._channel = None
        return reply

    def close(self) -> None:
        # No graceful exit: torch's interpreter teardown costs seconds and the workers hold
        # nothing worth keeping.
        for channel in (self._channel, self._spare):
            if channel is not None:
                channel.kill()
        self._channel = self._spare = None
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- internals -------------------------------------------------------------------------

    def _ensure_channel(self) -> _Channel:
        self.start()
        if self._channel is None:
            if self._spare is not None:
                self._channel, self._spare = self._spare, None
            elif self._server is not None:
                self._channel = self._spawn_forked()
            else:
                self._channel = self._spawn_plain(warm_up=True)
            self.started += 1
        if self._spare is None and self._wants_spare():
            self._spare = self._spawn_spare()
        return self._channel

    def _spawn_forked(self) -> _Channel:
        """A forked worker. A server that died after forking (a worker's fault took it down, or
        it was killed) is replaced; one that cannot fork here means fresh processes from now on."""
        assert self._server is not None and self._log is not None
        while True:
            try:
                return self._server.spawn()
            except OSError:
                died = self._server.ready
                self._server.close()
                if died and self._replacements < _SERVER_REPLACEMENTS:
                    self._replacements += 1
                    self._server = _ForkedWorkers(self._log, self._cwd, self.cache_dir)
                    continue
                self._server, self.fork = None, False
                return self._spawn_plain(warm_up=True)

    def _wants_spare(self) -> bool:
        if self._server is not None and not self._server.ready:
            return False
        if self.spare is not None:
            return self.spare
        if self._server is not None:
            return self._server.gpu and self._uses_cuda
        return self._uses_cuda  # fresh processes on a GPU: the next one imports torch while this one checks

    def _spawn_spare(self) -> _Channel | None:
        """A worker whose warm-up runs while the current one checks: forked, it creates its
        CUDA context; a fresh process also imports torch and warms Inductor up."""
        if self._server is None:
            spare = self._spawn_plain(warm_up=False)
            spare.warming = self._send(spare, {"op": "warmup", "cuda": self._uses_cuda})
            return spare
        try:
            spare = self._server.spawn()
        except OSError:  # the server went away: the next replacement finds out
            return None
        spare.warming = self._send(spare, {"op": "prepare", "cuda": self._uses_cuda})
        return spare

    def _spawn_plain(self, *, warm_up: bool) -> _Channel:
        proc = subprocess.Popen(_WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                cwd=self._cwd, env=_environment(self.cache_dir), start_new_session=True)
        channel = _Channel(proc.pid, proc.stdin, proc.stdout, proc.wait,  # type: ignore[arg-type]
                           lambda: threading.Thread(target=proc.wait, daemon=True).start())
        if warm_up:
            channel.warming = self._send(channel, {"op": "warmup"})
        return channel

    def _send(self, channel: _Channel, request: dict[str, Any]) -> int:
        self._next_id += 1
        line = json.dumps({**request, "id": self._next_id}, default=str) + "\n"
        try:
            channel.requests.write(line.encode())
            channel.requests.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # it died; _receive reports how
        return self._next_id

    def _receive(self, channel: _Channel, request_id: int, timeout: float) -> Reply:
        deadline = time.monotonic() + timeout
        progress: dict[str, Any] = {}
        while True:
            while b"\n" in channel.buffer:
                line, channel.buffer = channel.buffer.split(b"\n", 1)
                data = json.loads(line)
                if data.get("id") != request_id:
                    continue
                if "progress" in data:
                    progress = data["progress"]
                    continue
                return Reply(data, progress=progress)
            left = deadline - time.monotonic()
            if left <= 0:
                channel.kill()
                return Reply(None, hung_after=timeout, progress=progress)
            ready, _, _ = select.select([channel.replies_fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(channel.replies_fd, 1 << 20)
            if not chunk:  # end of file: the worker died
                return Reply(None, crashed=channel.close(), progress=progress)
            channel.buffer += chunk


def _environment(cache_dir: str | None) -> dict[str, str]:
    """A fresh worker's environment: this process's, with the compile caches in ``cache_dir``."""
    env = child_environment()
    if cache_dir is not None:
        env.update(cache_environment(cache_dir))
    return env
