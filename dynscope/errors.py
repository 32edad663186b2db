"""Errors meant for people: each one is printed as a single line, never as a traceback."""

from __future__ import annotations


class DynscopeError(Exception):
    """A problem the user can act on (bad input, unreadable capture, missing tool).

    The CLI prints ``dynscope: <message>`` on stderr and exits with ``exit_code``.
    """

    exit_code = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class CaptureError(DynscopeError):
    """A file that is not a capture, is damaged, or is too new to read."""
