"""Launch the user's program in a recording child process and wait for it.

Running the program in a child keeps this process alive whatever the program does
(``os._exit``, a segfault in generated code, SIGKILL): it always records how the run ended
into the capture and can still print the summary. This process never imports torch.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dynscope.recorder import record_run_end
from dynscope.runner import fork_pool
from dynscope.runner.children import children_of_run
from dynscope.runner.fork_client import CHILD_MODULE, ForkedProcess, ForkServer
from dynscope.runner.interpreter import child_environment, module_command
from dynscope.runner.interrupts import SigintRelay
from dynscope.runner.program import Program, check_runnable
from dynscope.runner.spec import SPEC_FD_PREFIX, ChildSpec
from dynscope.store.header import is_capture_file
from dynscope.store.lock import exclusive_writer
from dynscope.store.schema import FILE_SUFFIX
from dynscope.store.writer import CaptureWriter, check_capture_target

# Signals a supervisor (torchrun, a batch system, the user) may send us: passed on to the
# program. SIGINT is passed on only when the child did not get it too (dynscope.runner.interrupts):
# a terminal's Ctrl-C already reaches the child, which shares our process group.
_FORWARDED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2") if hasattr(signal, name)
)


@dataclass(frozen=True)
class RunResult:
    capture_path: str
    returncode: int  # negative: killed by that signal, as subprocess reports it
    capture_written: bool

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode < 0 else None


def capture_path_for(program: Program, output: str | None, *, rank: int | None, world_size: int | None) -> str:
    """Where the capture goes. Under torchrun every rank writes its own file, named by rank."""
    if output is None:
        stem = os.path.splitext(os.path.basename(program.target.rstrip("/\\")))[0] or "program"
        output = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}{FILE_SUFFIX}"
    if rank is not None and (world_size or 1) > 1:
        base, ext = os.path.splitext(output)
        output = f"{base}.rank{rank}{ext or FILE_SUFFIX}"
    return os.path.abspath(output)


def rank_from_env() -> tuple[int | None, int | None]:
    try:
        return int(os.environ["RANK"]), int(os.environ.get("WORLD_SIZE", "1"))
    except (KeyError, ValueError):
        return None, None


class RunningChild(Protocol):
    """What the launcher and a ``wait`` use of the child: a ``subprocess.Popen``, or a child forked
    from the test suite's warm pool (fork_client.ForkedProcess)."""

    pid: int

    def wait(self, timeout: float | None = None) -> int: ...

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


def launch(spec: ChildSpec, *, popen_kwargs: dict[str, Any] | None = None,
           wait: Callable[[RunningChild], int] | None = None) -> RunResult:
    """Run the program in ``python -m dynscope.runner.child SPEC`` and record how it ended.

    ``popen_kwargs`` go to Popen (e.g. where the program's output goes), and ``wait(proc)``
    replaces ``proc.wait()`` for a caller that watches the child while it runs (dynscope minify
    stops one that hangs).
    """
    check_runnable(spec.program)
    check_capture_target(spec.capture)
    relay = SigintRelay()
    with exclusive_writer(spec.capture):
        started = time.time()
        try:
            proc = _forked_from_pool(spec, popen_kwargs or {}) or _fresh_child(spec, relay, popen_kwargs or {})
        except BaseException:
            relay.close()
            raise
        relay.started(proc)
        # (Set only now: an ignored SIGINT would be inherited, and python would then never
        # raise KeyboardInterrupt in the child.)
        previous = {signal.SIGINT: signal.signal(signal.SIGINT, relay.on_sigint)}
        previous.update({sig: signal.signal(sig, lambda signum, _frame: proc.send_signal(signum))
                         for sig in _FORWARDED_SIGNALS})
        try:
            returncode = wait(proc) if wait is not None else proc.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if isinstance(proc, ForkedProcess):
                proc.close()
        written = _finish_capture(spec.capture, returncode, time.time() - started, program_pid=proc.pid)
    return RunResult(spec.capture, returncode, written)


def _fresh_child(spec: ChildSpec, relay: SigintRelay, popen_kwargs: dict[str, Any]) -> subprocess.Popen[bytes]:
    kwargs = {**popen_kwargs, "pass_fds": (*popen_kwargs.get("pass_fds", ()), relay.child_fd)}
    return start_fresh_child(dataclasses.replace(spec, sigint_notes_fd=relay.child_fd), **kwargs)


def start_fresh_child(spec: ChildSpec, **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """A fresh recording child (``child_command``), its spec handed over in an unlinked file whose
    descriptor it inherits: one command-line argument is at most 128 KiB on Linux, and a spec can
    carry a patch's changed source (megabytes)."""
    with tempfile.TemporaryFile() as handed:
        handed.write(spec.to_json().encode("utf-8"))
        handed.flush()
        handed.seek(0)
        kwargs = {"env": child_environment(), **popen_kwargs,
                  "pass_fds": (*popen_kwargs.get("pass_fds", ()), handed.fileno())}
        return subprocess.Popen(child_command(spec, spec_fd=handed.fileno()), **kwargs)


def _forked_from_pool(spec: ChildSpec, popen_kwargs: dict[str, Any]) -> ForkedProcess | None:
    """Under the test suite's warm pool (a test-only setting, dynscope/runner/fork_pool.py): the
    child forked from a server the pool forks, on the descriptors Popen would have given it.
    It is in a session of its own, so a terminal's Ctrl-C reaches only this process: it takes no
    SIGINT notes, and the relay passes every SIGINT on. None: a fresh process, as without the pool."""
    if not fork_pool.configured() or set(popen_kwargs) - {"stdin", "stdout", "stderr"}:
        return None
    with open(os.devnull, "wb") as quiet:  # the server's own log lines are not the program's output
        server = ForkServer.from_pool(quiet.fileno())
    if server is None:
        return None
    fds = [_descriptor(popen_kwargs.get(name), default) for default, name in enumerate(("stdin", "stdout", "stderr"))]
    try:
        # No working directory on its sys.path: the program's own (python's) is put there by the child.
        child = server.spawn(CHILD_MODULE, spec.to_json(), stdin=fds[0], stdout=fds[1], stderr=fds[2],
                             cwd=os.getcwd())
    except (OSError, ValueError):
        server.close()
        return None
    finally:
        for default, fd in enumerate(fds):
            if fd != default:
                os.close(fd)
    return ForkedProcess(server, child)


def _descriptor(target: Any, default: int) -> int:
    """The descriptor Popen would give the child for ``target`` (None: this process's own)."""
    if target is None:
        return default
    if target == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDWR)
    return os.dup(target if isinstance(target, int) else target.fileno())


def child_command(spec: ChildSpec, *, spec_fd: int | None = None) -> list[str]:
    """The command line of a fresh recording child: this python, with its flags, and no working
    directory on its sys.path until the program's own is put there (dynscope.runner.interpreter).
    ``spec_fd``: the spec is read from that inherited descriptor instead of the command line."""
    return [*module_command(CHILD_MODULE, flags=True), spec.to_json() if spec_fd is None else f"{SPEC_FD_PREFIX}{spec_fd}"]


def finish_capture(path: str, returncode: int, elapsed_s: float, *, program_pid: int | None = None) -> bool:
    """Record how a run ended (for runners that start the child some other way: dynscope fix)."""
    return _finish_capture(path, returncode, elapsed_s, program_pid=program_pid)


def _finish_capture(path: str, returncode: int, elapsed_s: float, *, program_pid: int | None = None) -> bool:
    """Record how the run ended (the child may have died before it could), and which of the
    program's child processes recorded captures of their own."""
    if not is_capture_file(path):
        return False
    children = children_of_run(path, program_pid) if program_pid is not None else []
    try:
        writer = CaptureWriter.reopen(path)
    except sqlite3.Error:  # the disk filled up: the child already said so; keep what is there
        return True
    try:
        record_run_end(
            writer,
            exit_code=returncode if returncode >= 0 else None,
            signal=-returncode if returncode < 0 else None,
            elapsed_s=elapsed_s,
        )
        writer.mark_ended(killed_by=-returncode if returncode < 0 else None)  # the child never closed it?
        if children:
            writer.set_meta(child_captures=[dataclasses.asdict(c) for c in children])
    finally:
        writer.close()
    for child in children:
        _settle_child(os.path.join(os.path.dirname(path), child.file), child.pid)
    return True


def _settle_child(path: str, pid: int) -> None:
    """A child capture its process never closed (a fork child leaves through ``os._exit``):
    once the process is gone, say how much is known of its end, instead of "still running"."""
    try:
        os.kill(pid, 0)
        return  # still running (a daemon the program left behind): its own close will settle it
    except ProcessLookupError:
        pass
    except OSError:
        return
    try:
        writer = CaptureWriter.reopen(path)
    except sqlite3.Error:
        return
    try:
        writer.mark_unclosed(f"child process {pid} ended without closing its capture (os._exit, or a "
                             "signal): everything it recorded until then is here")
    finally:
        writer.close()


def exit_like(returncode: int) -> int:
    """Our exit status should be the program's: re-raise a fatal signal on ourselves."""
    if returncode < 0:
        sig = -returncode
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL and SIGSTOP have no handler to reset
        os.kill(os.getpid(), sig)
        return 128 + sig  # not reached for fatal signals
    return returncode
