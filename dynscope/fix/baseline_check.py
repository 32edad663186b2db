"""Is the baseline a run fix can work from? A program that fails on its own (an argparse error, a
missing module) or never reaches torch.compile has nothing to fix: say so first, with the
program's own last words, instead of "no problems found"."""

from __future__ import annotations

import os

from dynscope.errors import DynscopeError

LAST_LINES = 8
_TAIL_BYTES = 8192  # the end of the stderr file is read, never the whole of a chatty program's log


class BaselineFailed(DynscopeError):
    """The baseline cannot be fixed; ``last_lines``: the end of the program's stderr, as it wrote it."""

    def __init__(self, message: str, last_lines: tuple[str, ...]) -> None:
        super().__init__(message, exit_code=2)
        self.last_lines = last_lines


def check_baseline(exit_code: int | None, compiled: bool, has_error_problem: bool, stderr_path: str) -> None:
    """Raise ``BaselineFailed`` when the first run exited non-zero for a reason fix cannot try
    remedies on (no compile error among its problems), or compiled nothing at all."""
    failed = exit_code not in (0, None)
    if compiled and (not failed or has_error_problem):
        return  # a compile error is what fix is for: its remedies are tried
    what = (f"exited with status {exit_code}" if failed else "ran to its end") + \
        (" without compiling anything" if not compiled else " on an error of its own (not torch.compile's)")
    last = last_lines(stderr_path)
    raise BaselineFailed(f"the program {what}, so there is nothing for fix to try (its output: {stderr_path}"
                         f"{'' if last else ', empty'}); dynscope's own options go before the script",
                         last)


def last_lines(path: str, count: int = LAST_LINES) -> tuple[str, ...]:
    """The last ``count`` non-empty lines of a file (its last few KB), decoded leniently."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _TAIL_BYTES))
            tail = f.read()
    except OSError:
        return ()
    lines = [line for line in tail.decode("utf-8", "replace").splitlines() if line.strip()]
    if size > _TAIL_BYTES and lines:
        lines = lines[1:]  # the first may be cut
    return tuple(lines[-count:])
