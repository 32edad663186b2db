"""Many runs of one program, each a recording child (ChildSpec), started as cheaply as possible.

Forked from one fork server (dynscope/runner/fork_server.py) wherever it can fork -- on CUDA
builds of torch too: the server creates no CUDA context, each run creates its own. A server
that dies (a run's fault took it down, or it was killed) is replaced by a fresh one for the next
run; one that says it cannot fork here means fresh ``python -m dynscope.runner.child`` processes
from then on. Every run is in a session of its own (stopping it stops all it started), reads
/dev/null and writes its output to the descriptors the caller gives.

The caller records how a run ended (launcher.finish_capture): no launcher process stands between.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time
from dataclasses import dataclass

from dynscope.runner.cache_dirs import caches_in
from dynscope.runner.fork_client import CHILD_MODULE, ForkedChild, ForkServer, ServerGone
from dynscope.runner.launcher import start_fresh_child
from dynscope.runner.spec import ChildSpec

# A server that died this many times is not started again: fresh processes from then on.
_REPLACEMENTS = 3


@dataclass
class RunHandle:
    pid: int
    requested_at: float  # time.time() when the run was asked for
    forked: tuple[ForkServer, ForkedChild] | None = None  # forked: by that server
    proc: subprocess.Popen[bytes] | None = None  # a fresh process


class ProgramRuns:
    """``fork``: False starts every run as a fresh process (no server at all). ``preload``:
    modules of dynscope the server imports before its first fork (the extensions the runs name).
    ``cache_dir``: the compile caches' directory of every run whose spec names none (a private
    one the runs share: dynscope.runner.cache_dirs.SharedCacheDir)."""

    def __init__(self, log_fd: int, *, fork: bool = True, preload: tuple[str, ...] = (),
                 server_command: list[str] | None = None, cache_dir: str | None = None) -> None:
        self._log_fd = log_fd
        self._cache_dir = cache_dir
        self._preload = preload
        self._server_command = server_command  # tests: a stand-in server without torch
        self._server: ForkServer | None = self._new_server() if fork and hasattr(os, "fork") else None
        self.replaced = 0  # servers started again after one died
        self.fresh_why: str | None = None if self._server is not None else "forking is off"

    @property
    def forking(self) -> bool:
        return self._server is not None

    def start(self, spec: ChildSpec, *, stdout: int, stderr: int, cwd: str | None, deadline: float) -> RunHandle | None:
        """The run started, or None if the server was still starting when ``deadline`` passed."""
        if spec.cache_dir is None and self._cache_dir is not None:
            spec = dataclasses.replace(spec, cache_dir=self._cache_dir)
        while self._server is not None:
            server = self._server
            try:
                state = server.wait_ready(deadline - time.time())
                if state is None:
                    return None
                if not state.ready:
                    self._fresh_from_now_on(state.why)
                    break
                with open(os.devnull, "rb") as devnull:
                    child = server.spawn(CHILD_MODULE, spec.to_json(), stdin=devnull.fileno(), stdout=stdout,
                                         stderr=stderr, cwd=cwd)
                return RunHandle(child.pid, child.requested_at, forked=(server, child))
            except ServerGone as e:
                self._replace(server, str(e))
        requested_at = time.time()
        proc = start_fresh_child(spec, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, cwd=cwd,
                                 start_new_session=True)
        return RunHandle(proc.pid, requested_at, proc=proc)

    def poll(self, run: RunHandle) -> int | None:
        if run.forked is not None:
            server, child = run.forked
            return server.returncode(child)
        assert run.proc is not None
        return run.proc.poll()

    def stop(self, run: RunHandle) -> int:
        """Kill it with everything it started; its return code."""
        try:
            os.killpg(run.pid, signal.SIGKILL)
        except OSError:
            pass
        if run.forked is not None:
            server, child = run.forked
            code = server.wait(child, timeout=10)
            return code if code is not None else -signal.SIGKILL
        assert run.proc is not None
        run.proc.kill()
        return run.proc.wait()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self._server = None

    # -- servers -----------------------------------------------------------------------------

    def _replace(self, server: ForkServer, why: str) -> None:
        server.close()
        if self.replaced >= _REPLACEMENTS:
            self._fresh_from_now_on(f"the fork server died {self.replaced + 1} times ({why})")
            return
        self.replaced += 1
        self._server = self._new_server()

    def _new_server(self) -> ForkServer:
        with caches_in(self._cache_dir):  # its import of torch touches no other cache directory
            return ForkServer(self._log_fd, self._preload, command=self._server_command)

    def _fresh_from_now_on(self, why: str) -> None:
        if self._server is not None:
            self._server.close()
        self._server = None
        self.fresh_why = why
