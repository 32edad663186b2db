"""SIGTERM, SIGHUP and SIGINT end a ``dynscope fix`` cleanly: every run it started ends too.

Trials run in sessions of their own (so one can be stopped with everything it started), which
also means a signal meant for ``dynscope fix`` never reaches them. Python's default for SIGTERM
and SIGHUP ends the process on the spot, leaving the fork server and the trials running; for
SIGINT it raises KeyboardInterrupt. Here all three raise :class:`Stopped` instead, so the
``finally`` blocks of the run loop (dynscope/fix/trials.py) and of the session stop every trial
and the fork server; while they do, further signals are ignored so the cleanup is not cut short.
The command then exits with 128 + the signal's number (143 SIGTERM, 129 SIGHUP, 130 SIGINT).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name))


class Stopped(BaseException):
    """A signal asked ``dynscope fix`` to stop (a BaseException, like KeyboardInterrupt, so that
    no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextmanager
def signals_stop_the_run() -> Iterator[None]:
    def stop(signum: int, _frame) -> None:
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise Stopped(signum)

    previous = {sig: signal.signal(sig, stop) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
