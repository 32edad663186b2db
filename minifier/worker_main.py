"""The check worker: answers check requests, one JSON line each way.

Two ways to run it (minifier/worker.py picks):

* ``python -m dynscope.minifier.worker_main`` serves requests on stdin/stdout.
* ``python -m dynscope.minifier.worker_main --fork-server FD`` imports torch, warms
  Inductor up (compiling, never running, a small graph, so that no OpenMP thread exists
  yet), then waits on the Unix socket FD. For each "spawn" message, which carries a request
  pipe and a reply pipe, it forks a worker that serves them in a session of its own. A check
  that kills its worker (an abort or segfault in generated code) then costs a fork, not a
  fresh interpreter, torch import and Inductor warm-up (seconds each time).

Torch and generated code print freely, so a worker points file descriptor 1 at stderr (the
worker log) and writes replies to its own descriptor.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
import warnings
from typing import IO, Any


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
        "warmup": lambda request: checks.warm_up(),
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
    from dynscope.minifier import checks
    from dynscope.probes import compat

    compat.single_threaded_compiles()
    checks.warm_up(run=False)
    if compat.cuda_initialized():  # a forked child could not use CUDA: let the parent start fresh workers
        sock.sendall(b'{"ready": false}\n')
        return
    sock.sendall(b'{"ready": true}\n')
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
