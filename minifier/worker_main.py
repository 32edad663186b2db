"""The check worker: answers check requests, one JSON line each way.

``python -m dynscope.minifier.worker_main`` serves requests on stdin/stdout; forked from the
runner's fork server (minifier/worker.py picks), the same ``main`` runs on the request and reply
pipes the parent passed. The server imports this module and runs :func:`prepare_fork_server`
first (Inductor warmed up, no CUDA context). A check that kills its worker (an abort or segfault
in generated code) or poisons its CUDA context (a device-side assert) then costs a fork, and a
new CUDA context, not a fresh interpreter, torch import and Inductor warm-up (seconds each time).

Torch and generated code print freely, so a worker points file descriptor 1 at stderr (the
worker log) and writes replies to its own descriptor.
"""

from __future__ import annotations

import json
import os
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


def prepare_fork_server(*, gpu: bool) -> None:
    """In the runner's fork server, before its first fork (dynscope/runner/fork_server.py): pay
    Inductor's first-compile costs once, creating no CUDA context and no thread a fork would lose.

    Without a GPU, a compile (never run) of a small graph, in this process (no compile pool).
    With one, only the modules a GPU compile needs are imported: Inductor's first compile
    initializes CUDA where a GPU is present. Each forked worker then creates its own CUDA
    context on first use, so that a device-side assert poisons only that worker."""
    from dynscope.minifier import checks
    from dynscope.probes import compat

    compat.single_threaded_compiles()  # no compile pool (its threads would not survive a fork)
    checks.warm_up(run=False, compile=not gpu)


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    warnings.filterwarnings("ignore")
    serve(sys.stdin, replies)


if __name__ == "__main__":
    main()
