"""A fork server for trial runs: import torch once, then fork one fresh child per run.

Importing torch, Dynamo and dynscope's probes is most of a small program's run (about 3 s of 5 on
2 cores); every trial would pay it again. This process imports them, compiles nothing and sets
no config, then waits for requests on stdin (one JSON line each: a run's spec, its environment
and where its output goes). Each request is answered by forking a child that runs exactly what
the ``dynscope explain`` child runs (dynscope.runner.child.main) with its own session, stdin
from /dev/null and stdout/stderr to the run's files. Lines back on stdout:
``{"id", "pid"}`` when a child starts and ``{"id", "returncode"}`` when it ends (negative: the
signal that killed it).

It never outlives ``dynscope fix``: the end of its input (the parent closed it, or died) with a
child still running, SIGTERM or SIGHUP kill every child's process group and end it at once.
SIGINT is ignored: Ctrl-C reaches this process too (it shares the parent's process group), and
the parent decides what an interrupt stops.

    python -m dynscope.fix.zygote
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys

_ENDING = {signal.SIGTERM, signal.SIGHUP}


def main() -> None:
    import torch  # noqa: F401  the point of this process

    from dynscope.probes import compat

    if compat.gpu_build():
        # Forking after a GPU runtime has started is unsafe, and importing Inductor may start it:
        # the parent runs each trial as its own `dynscope explain` instead.
        _send({"ready": False, "why": "a GPU build of torch: trials run as separate processes"})
        return
    import torch._dynamo  # noqa: F401

    compat.preload_for_probes()  # what installing the probes imports: each run would pay it again

    import dynscope.probes  # noqa: F401
    import dynscope.recorder  # noqa: F401
    import dynscope.runner.child  # noqa: F401
    from dynscope.fix import apply  # noqa: F401

    children: dict[int, str] = {}
    server = os.getpid()

    def end(*_signal) -> None:
        _kill_all(children)
        os._exit(0)  # no interpreter teardown: with torch imported it takes seconds

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in _ENDING:
        signal.signal(sig, end)
    _send({"ready": True})
    stdin = sys.stdin.buffer
    buffered = b""
    try:
        while True:
            ready, _, _ = select.select([stdin], [], [], 0.05)
            if ready:
                chunk = os.read(stdin.fileno(), 65536)
                if not chunk:  # the parent is done (every run ended) or gone: none may outlive it
                    end()
                buffered += chunk
                while b"\n" in buffered:
                    line, buffered = buffered.split(b"\n", 1)
                    if line.strip():
                        _fork(json.loads(line), children)
            for pid in list(children):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    _send({"id": children.pop(pid), "returncode": os.waitstatus_to_exitcode(status)})
    except BaseException:  # the parent went away mid-message (a broken pipe), or a bad request
        if os.getpid() != server:
            raise  # a forked child ending (SystemExit): it exits as python would
        end()


def _fork(request: dict, children: dict[int, str]) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    # No SIGTERM between the fork and the child's entry in `children`: it would be left running.
    signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING)
    pid = os.fork()
    if pid == 0:
        _child(request)  # never returns: SystemExit ends the child as python would
    children[pid] = request["id"]
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDING)
    _send({"id": request["id"], "pid": pid})


def _kill_all(children: dict[int, str]) -> None:
    """SIGKILL to each child's process group (its own session: the run and all it started),
    and to the child itself in case it has not yet made that group; then reap them."""
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


def _send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _child(request: dict) -> None:
    os.setsid()  # its own process group: the parent can stop the run and everything it started
    for sig in _ENDING:  # the program gets python's defaults, not the server's handlers
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDING)
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            # made new by the parent's run loop; a link put there since is not followed
                            (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW),
                            (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW)):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    if request.get("cwd"):
        os.chdir(request["cwd"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.update(request.get("env") or {})
    from dynscope.runner import child

    sys.argv = [sys.argv[0], json.dumps(request["spec"])]
    child.main()
    raise SystemExit(0)


if __name__ == "__main__":
    main()
