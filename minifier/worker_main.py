"""The check worker: answers check requests, one JSON line each way.

Two ways to run it (minifier/worker.py picks):

* ``python -m dynscope.minifier.worker_main`` serves requests on stdin/stdout.
* ``python -m dynscope.minifier.worker_main --fork-server FD`` imports torch, warms
  Inductor up (without a GPU: compiling, never running, a small graph, so that no OpenMP
  thread exists yet; with one: importing what a GPU compile needs, creating no CUDA context,
  see prepare_server), then waits on the Unix socket FD. For each "spawn" message, which
  carries a request pipe and a reply pipe, it forks a worker that serves them in a session of
  its own. A check that kills its worker (an abort or segfault in generated code) or poisons
  its CUDA context (a device-side assert) then costs a fork, and a new CUDA context, not a
  fresh interpreter, torch import and Inductor warm-up (seconds each time).

Torch and generated code print freely, so a worker points file descriptor 1 at stderr (the
worker log) and writes replies to its own descriptor.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from typing import IO, Any

NVML_CUDA_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def serve(requests: IO[str], replies: IO[str]) -> None:
    from dynscope.minifier import checks
    from dynscope.probes import compat

    def send(data: dict[str, Any]) -> None:
        replies.write(json.dumps(data, default=str) + "\n")
        replies.flush()

    handlers = {
        "check": lambda request: checks.run_check(
            request, lambda progress: send({"id": request.get("id"), "progress": progress})),
        "source": lambda request: checks.forward_source(request["graph"]),
        "warmup": lambda request: {**checks.warm_up(), "prepare": checks.prepare(cuda=bool(request.get("cuda")))},
        "prepare": lambda request: checks.prepare(cuda=bool(request.get("cuda"))),
        "configs": lambda request: {"configs": checks.nondefault_from_dumps(request["dumps"])},
        "repro_values": checks.save_repro_values,
        "plan": lambda request: {"plan": compat.compiler_bisector_subsystems() or {}},
        "ping": lambda request: {"pid": os.getpid()},
    }
    for line in requests:
        request = json.loads(line)
        handler = handlers.get(request.get("op"))
        try:
            reply = handler(request) if handler else {"error": f"unknown request {request.get('op')!r}"}
        except Exception as e:  # a bug in a check must not end the worker
            traceback.print_exc()
            reply = {"error": f"{type(e).__name__}: {e}"}
        send({"id": request.get("id"), **reply})


def fork_server(sock: socket.socket) -> None:
    """Fork a worker per "spawn" message; report a worker's exit status on "reap"."""
    nvml_check = os.environ.get(NVML_CUDA_CHECK)
    # Before anything asks: torch.cuda.is_available(), which Inductor and Triton call, then
    # counts devices with NVML, where CUDA's runtime would call cuInit and leave forked
    # children unable to use CUDA ("poison fork", see torch.cuda.is_available's docstring).
    # Read at each call; workers get the program's own setting back.
    os.environ[NVML_CUDA_CHECK] = "1"
    state = prepare_server()
    print(f"dynscope fork server: {state['why']}", file=sys.stderr, flush=True)
    sock.sendall(json.dumps(state).encode() + b"\n")
    if not state["ready"]:  # the parent starts fresh workers instead
        return
    while True:
        message, fds, _flags, _addr = socket.recv_fds(sock, 4096, 2)
        if not message:
            return  # the parent went away
        request = json.loads(message)
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                sock.close()
                os.setsid()  # its own process group: killing it takes its compile subprocesses too
                _restore_env(NVML_CUDA_CHECK, nvml_check)  # a worker is like a fresh process
                try:
                    serve(os.fdopen(fds[0], "r"), os.fdopen(fds[1], "w", buffering=1))
                finally:
                    os._exit(0)
            for fd in fds:
                os.close(fd)
            sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        elif request["op"] == "reap":
            _, status = os.waitpid(request["pid"], 0)
            sock.sendall(json.dumps({"returncode": _returncode(status)}).encode() + b"\n")


def prepare_server() -> dict[str, Any]:
    """Import torch and warm Inductor up without creating a CUDA context; whether forked
    workers will work ("ready", "why") and whether a GPU is present ("gpu").

    Without a GPU, a compile (never run) of a small graph pays Inductor's first-compile costs.
    With one, only the modules a GPU compile needs are imported: Inductor's first compile
    initializes CUDA where a GPU is present. Each forked worker then creates its own CUDA
    context on first use, so that a device-side assert poisons only that worker."""
    from dynscope.minifier import checks
    from dynscope.probes import compat

    compat.single_threaded_compiles()  # no compile pool (its threads would not survive a fork)
    gpu = compat.gpu_present()
    checks.warm_up(run=False, compile=not gpu)
    ready, why = fork_readiness(cuda_initialized=compat.cuda_initialized(), gpu=gpu,
                                child_can_use_cuda=_cuda_works_in_a_child)
    return {"ready": ready, "why": why, "gpu": gpu}


def fork_readiness(*, cuda_initialized: bool, gpu: bool, child_can_use_cuda: Callable[[], bool]) -> tuple[bool, str]:
    """Whether a warmed-up fork server can fork check workers. A process that initialized
    CUDA cannot (its children cannot use CUDA); one that did not may still have made a CUDA
    driver call that has the same effect, so where a GPU is present a forked test child
    must create a CUDA context and run a kernel first."""
    if cuda_initialized:
        return False, "CUDA was initialized while warming up: fresh worker processes instead of forks"
    if gpu and not child_can_use_cuda():
        return False, "a forked test child could not use CUDA: fresh worker processes instead of forks"
    return True, "forking workers" + (" (each creates its own CUDA context)" if gpu else "")


_CUDA_TEST_TIMEOUT_S = 120.0


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
            return _returncode(status) == 0
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return False
        time.sleep(0.05)


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _returncode(status: int) -> int:
    """As subprocess reports it: negative for a signal."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    warnings.filterwarnings("ignore")
    if len(sys.argv) > 2 and sys.argv[1] == "--fork-server":
        fork_server(socket.socket(fileno=int(sys.argv[2])))
    else:
        serve(sys.stdin, replies)


if __name__ == "__main__":
    main()
