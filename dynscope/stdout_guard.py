"""Standard output that fails as one line: `dynscope summary c > /dev/full` says the output
could not be written (exit 2), instead of "internal error" (exit 70) or a traceback at exit.

Only the process's own stdout is guarded (a test capturing output keeps its stream)."""

from __future__ import annotations

import contextlib
import os
import sys

from dynscope.errors import DynscopeError


class StdoutError(DynscopeError):
    """Writing to standard output failed (a full disk, /dev/full, an I/O error)."""


class _GuardedStream:
    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:  # the reader left (`| head`): handled as a clean exit
            raise
        except OSError as e:
            raise _failed(e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _failed(e) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _failed(e: OSError) -> StdoutError:
    return StdoutError(f"cannot write the output to standard output: {e.strerror or e}")


@contextlib.contextmanager
def guarded_stdout():
    """While active, a failed write to stdout raises StdoutError; on leaving, what is still
    buffered is written (so its failure is reported too)."""
    real = sys.stdout
    if real is None or real is not sys.__stdout__:
        yield
        return
    sys.stdout = _GuardedStream(real)
    try:
        yield
        sys.stdout.flush()
    except StdoutError:
        # Nothing more can reach it; keep python's own flush at exit from failing again.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, real.fileno())
        raise
    finally:
        sys.stdout = real
