"""The fork server: import torch once, then fork one fresh child per request.

Importing torch, Dynamo and dynscope's probes is most of a small program's run (seconds; on a
GPU machine most of a 15 s run): every trial of ``dynscope fix`` and every check worker of
``dynscope minify`` would pay it again. This process pays it once, compiles nothing for the
program, sets no config, and forks a child per "spawn" request. A child runs what
``python -m MODULE ARGUMENT`` would run (``MODULE.main()`` with that ``sys.argv``), minus the
imports: the recording child (dynscope.runner.child) with its ChildSpec, or a check worker.

GPU policy (for everyone): the server never creates a CUDA context -- a process that did cannot
fork CUDA users. torch.cuda.is_available() is answered by NVML here (see NVML_CUDA_CHECK), and
where a GPU is present a forked test child must create a context and run a kernel before the
server says it is ready. Each child then creates its own CUDA context, so a device fault (an
illegal address, a device-side assert) poisons only that child. Where the server cannot
promise this it says "not ready" and the parent starts fresh processes instead; a server that
dies is replaced by the parent (dynscope/runner/fork_client.py).

Children: each in a session (process group) of its own, stdin/stdout/stderr the descriptors
the request passed (the parent opens them: /dev/null and files it made new), the server's
signal handlers reset to python's. The server never outlives its parent: the end of its socket
(the parent closed it, or died), SIGTERM or SIGHUP kill every child's process group and end it
at once; SIGINT is ignored (the parent decides what an interrupt stops).

Protocol, one JSON object per message on a Unix socket (the parent's end of a socketpair):
server -> parent ``{"ready", "why", "gpu"}`` once; parent -> server the request's length (8 bytes,
big-endian) with three descriptors (stdin, stdout, stderr), then the request ``{"op": "spawn", "id",
"module", "argument", "cwd", "sys_path0"}`` (of any size: a ChildSpec can carry a patch's changed
source); server -> parent
``{"id", "pid"}`` when the child runs (or ``{"id", "error"}``), ``{"id", "returncode"}`` when it
ends (negative: the signal that killed it).

    python -m dynscope.runner.fork_server SOCKET_FD [PRELOAD_MODULE ...]

A PRELOAD_MODULE (``dynscope.*``) is imported before the first fork; if it has
``prepare_fork_server(gpu=...)``, that runs too (the minifier warms Inductor up there).
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

from dynscope.runner import quick_exit
from dynscope.runner.interpreter import without_directories
from dynscope.runner.spec import SpecError, check_extension_name

NVML_CUDA_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"
PREPARE_HOOK = "prepare_fork_server"
_ENDING = (signal.SIGTERM, signal.SIGHUP)
_CUDA_TEST_TIMEOUT_S = 120.0
REQUEST_HEADER_BYTES = 8  # a spawn request's length, sent with its descriptors; the request follows
_MAX_REQUEST_BYTES = 1 << 30


def fork_readiness(*, cuda_initialized: bool, gpu: bool, child_can_use_cuda: Callable[[], bool]) -> tuple[bool, str]:
    """Whether a prepared server can fork children that use CUDA. A process that initialized
    CUDA cannot; one that did not may still have made a CUDA driver call with the same effect,
    so where a GPU is present a forked test child must create a CUDA context and run a kernel first."""
    if cuda_initialized:
        return False, "CUDA was initialized while preparing: fresh processes instead of forks"
    if gpu and not child_can_use_cuda():
        return False, "a forked test child could not use CUDA: fresh processes instead of forks"
    return True, "forking" + (" (each child creates its own CUDA context)" if gpu else "")


def prepare_server(preload: list[str]) -> dict[str, Any]:
    """Import torch and what every child imports, creating no CUDA context; whether forked
    children will work ("ready", "why") and whether a GPU is present ("gpu")."""
    import torch  # noqa: F401  the point of this process

    from dynscope.probes import compat

    compat.preload_for_probes()  # what installing the probes imports: each child would pay it again

    import dynscope.probes  # noqa: F401
    import dynscope.recorder  # noqa: F401
    import dynscope.runner.child  # noqa: F401

    gpu = compat.gpu_present()
    for name in preload:
        module = importlib.import_module(check_extension_name(name))
        prepare = getattr(module, PREPARE_HOOK, None)
        if callable(prepare):
            prepare(gpu=gpu)
    ready, why = fork_readiness(cuda_initialized=compat.cuda_initialized(), gpu=gpu,
                                child_can_use_cuda=_cuda_works_in_a_child)
    return {"ready": ready, "why": why, "gpu": gpu}


def _cuda_works_in_a_child() -> bool:
    from dynscope.probes import compat

    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            compat.cuda_smoke_test()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    deadline = time.monotonic() + _CUDA_TEST_TIMEOUT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return False
        time.sleep(0.05)


def read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise EOFError("the parent went away mid-request")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class _Server:
    def __init__(self, sock: socket.socket, nvml_check: str | None) -> None:
        self.sock = sock
        self.nvml_check = nvml_check  # the program's own setting, given back to each child
        self.children: dict[int, str] = {}  # pid -> request id
        self.pid = os.getpid()
        self.cwd = os.getcwd()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for sig in _ENDING:
            signal.signal(sig, self.end)

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def end(self, *_signal: object) -> NoReturn:
        _kill_all(self.children)
        os._exit(0)  # no interpreter teardown: with torch imported it takes seconds

    def serve(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.sock], [], [], 0.05)
                if ready:
                    header, fds, _flags, _addr = socket.recv_fds(self.sock, REQUEST_HEADER_BYTES, 3)
                    if not header:  # the parent is done or gone: no child may outlive it
                        self.end()
                    header += read_exactly(self.sock, REQUEST_HEADER_BYTES - len(header))
                    size = int.from_bytes(header, "big")
                    if size > _MAX_REQUEST_BYTES:
                        raise ValueError(f"a request of {size} bytes")
                    self.handle(json.loads(read_exactly(self.sock, size)), fds)
                for pid in list(self.children):
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        self.send({"id": self.children.pop(pid), "returncode": os.waitstatus_to_exitcode(status)})
        except BaseException:  # the parent went away mid-message (a broken pipe), or a bad request
            if os.getpid() != self.pid:
                raise  # a forked child ending (SystemExit): it exits as python would
            traceback.print_exc()
            self.end()

    def handle(self, request: dict[str, Any], fds: list[int]) -> None:
        request_id = str(request.get("id"))
        try:
            if request.get("op") != "spawn" or len(fds) != 3:
                raise SpecError(f"not a spawn request with three descriptors: {request.get('op')!r}")
            module = check_extension_name(request.get("module"))
            argument, cwd, path0 = request.get("argument", ""), request.get("cwd"), request.get("sys_path0")
            if not isinstance(argument, str) or not all(v is None or isinstance(v, str) for v in (cwd, path0)):
                raise SpecError("a spawn request's argument, cwd and sys_path0 are text")
        except SpecError as e:
            for fd in fds:
                os.close(fd)
            self.send({"id": request_id, "error": str(e)})
            return
        sys.stdout.flush()
        sys.stderr.flush()
        # No SIGTERM between the fork and the child's entry in `children`: it would be left running.
        signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING)
        pid = os.fork()
        if pid == 0:
            self._child(module, argument, cwd, path0, fds)  # never returns: SystemExit ends it as python would
        self.children[pid] = request_id
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDING)
        for fd in fds:
            os.close(fd)
        self.send({"id": request_id, "pid": pid})

    def _child(self, module: str, argument: str, cwd: str | None, path0: str | None, fds: list[int]) -> NoReturn:
        self.sock.close()
        os.setsid()  # its own process group: the parent can stop it and everything it started
        for sig in _ENDING:  # the program gets python's defaults, not the server's handlers
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDING)
        _restore_env(NVML_CUDA_CHECK, self.nvml_check)  # like a fresh process
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        if cwd:
            os.chdir(cwd)
        # No working directory on the child's sys.path (the server's, the child's): a planted json.py
        # there must not be imported by dynscope (a recording child puts the program's own first).
        sys.path[:] = without_directories(sys.path, [self.cwd, os.getcwd()])
        if path0 is not None:  # what the parent asked to be first
            sys.path.insert(0, path0)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        entry = importlib.import_module(module)
        sys.argv = [getattr(entry, "__file__", None) or module, argument]
        try:
            entry.main()
        except SystemExit as ending:
            quick_exit.leave(ending)
        quick_exit.leave(SystemExit(0))  # never returns: as python would end, minus its teardown


def _kill_all(children: dict[int, str]) -> None:
    """SIGKILL to each child's process group (its own session: the child and all it started),
    and to the child itself in case it has not made that group yet; then reap them."""
    for pid in list(children):
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for pid in list(children):
        try:
            os.waitpid(pid, 0)
        except OSError:
            pass


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _threads() -> str:
    """For the log: a fork copies only the calling thread (python warns when there are others)."""
    import threading

    try:
        with open("/proc/self/status") as f:
            total = next((line.split()[1] for line in f if line.startswith("Threads:")), "?")
    except OSError:
        total = "?"
    return f"{total} in all, python's: {', '.join(t.name for t in threading.enumerate())}"


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    nvml_check = os.environ.get(NVML_CUDA_CHECK)
    # Before anything asks: torch.cuda.is_available(), which Inductor and Triton call, then counts
    # devices with NVML, where CUDA's runtime would call cuInit and leave forked children unable to
    # use CUDA ("poison fork", see torch.cuda.is_available's docstring). Children get it back.
    os.environ[NVML_CUDA_CHECK] = "1"
    serve_parent(sock, sys.argv[2:], nvml_check)


def serve_parent(sock: socket.socket, preload: list[str], nvml_check: str | None) -> NoReturn:
    """Prepare, tell the parent whether this server forks, then serve it until it goes away.
    (Also how a warm fork pool's copy serves its client: dynscope/runner/fork_pool.py.)"""
    try:
        state = prepare_server(preload)
    except Exception as e:  # noqa: BLE001  the parent starts fresh processes instead
        traceback.print_exc()
        state = {"ready": False, "why": f"preparing failed ({type(e).__name__}: {e}): fresh processes instead of forks",
                 "gpu": False}
    print(f"dynscope fork server: {state['why']}", file=sys.stderr, flush=True)
    print(f"threads at the first fork: {_threads()}", file=sys.stderr, flush=True)
    server = _Server(sock, nvml_check) if state["ready"] else None  # its signal handlers before the answer
    sock.sendall(json.dumps(state).encode() + b"\n")
    if server is None:
        os._exit(0)
    server.serve()
    os._exit(0)  # serve() ends the process itself; never back into a caller's frames


if __name__ == "__main__":
    main()
