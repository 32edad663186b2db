"""SIGINT reaches the program exactly once, however it was sent.

``python SCRIPT`` is one process: any SIGINT raises KeyboardInterrupt in it. Under ``explain``
there are two, the launcher and the child running the program, in one process group:

- a terminal's Ctrl-C and ``kill -INT -PGID`` reach both: the child has its own already;
- ``kill -INT PID`` (a supervisor, an IDE, ``Popen.send_signal``) reaches only the launcher,
  which must pass it on.

The launcher cannot tell these apart from its own signal, so the child says which SIGINTs it
got: its Python signal wakeup fd (written by the interpreter's C-level handler the moment a
signal arrives, whatever Python handler the program installed) is a pipe to the launcher.
A SIGINT of the launcher's own is passed on only when no SIGINT of the child's arrived within
``_SAME_SIGNAL_S`` of it.

Limit: a program that sets its own wakeup fd (asyncio's ``loop.add_signal_handler`` does, and
clears it when the last handler goes) hides its later SIGINTs from the launcher: a terminal's
Ctrl-C then reaches it a second time, half a second after the first.
"""

from __future__ import annotations

import collections
import os
import signal
import threading
import time
from typing import Protocol

# One kill(2) of a process group reaches its members within microseconds; this is how far apart
# the launcher's and the child's copy may be seen (a loaded machine schedules them late).
_SAME_SIGNAL_S = 0.5


class Signallable(Protocol):
    """The child as the relay sees it (a ``subprocess.Popen``, or a forked child like one)."""

    def send_signal(self, sig: int) -> None: ...


class SigintRelay:
    """The launcher's side: reads the child's SIGINT notes and passes on the launcher's own
    SIGINTs that the child did not get."""

    def __init__(self) -> None:
        self._read_fd, self.child_fd = os.pipe()
        self._notes: collections.deque[float] = collections.deque()
        self._changed = threading.Condition()
        self._proc: Signallable | None = None
        self._echoes = 0  # SIGINTs passed on whose notes are still to come back

    def started(self, proc: Signallable) -> None:
        """The child runs (and holds its end of the pipe): start listening."""
        self._proc = proc
        os.close(self.child_fd)
        threading.Thread(target=self._read_notes, name="dynscope-sigint-notes", daemon=True).start()

    def on_sigint(self, signum: int, _frame: object) -> None:
        """SIGINT handler of the launcher (runs in its main thread, which only waits for the child)."""
        deadline = time.monotonic() + _SAME_SIGNAL_S
        with self._changed:
            while True:
                now = time.monotonic()
                while self._notes and self._notes[0] < now - _SAME_SIGNAL_S:
                    self._notes.popleft()  # a SIGINT sent to the child alone, earlier
                if self._notes:
                    self._notes.popleft()  # the child got this one itself
                    return
                if now >= deadline:
                    break
                self._changed.wait(deadline - now)
            if self._proc is None:
                return
            self._echoes += 1  # the child notes the SIGINT passed on, too: that note is not a new one
        self._proc.send_signal(signum)

    def close(self) -> None:
        """The child could not be started: nothing to listen to."""
        if self._proc is None:
            os.close(self.child_fd)
            os.close(self._read_fd)
        # Once started, the reader thread owns the read end and closes it at EOF (when the child
        # and any process it forked have exited); closing it here could hand its number to another file.

    def _read_notes(self) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self._read_fd, 512)
                except InterruptedError:
                    continue
                if not chunk:
                    return
                arrived = time.monotonic()
                with self._changed:
                    for byte in chunk:
                        if byte != signal.SIGINT:
                            continue
                        if self._echoes:
                            self._echoes -= 1
                        else:
                            self._notes.append(arrived)
                    self._changed.notify_all()
        except OSError:
            return
        finally:
            os.close(self._read_fd)


def report_sigints(fd: int | None) -> None:
    """The child's side: every signal the interpreter catches is written to ``fd`` as it arrives.
    Call first thing in the child's main thread, before anything slow (a Ctrl-C while torch
    imports must be noted too)."""
    if fd is None:
        return
    os.set_blocking(fd, False)
    os.set_inheritable(fd, False)  # not passed to programs the user's program starts
    signal.set_wakeup_fd(fd, warn_on_full_buffer=False)

    def forget_in_forked_child() -> None:
        # A forked child (a DataLoader or multiprocessing worker) gets the group's SIGINT too;
        # its notes would stand for SIGINTs the program's own process never saw.
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:  # forked from another thread: leave the fd, it is still the pipe
            return
        os.close(fd)

    os.register_at_fork(after_in_child=forget_in_forked_child)
