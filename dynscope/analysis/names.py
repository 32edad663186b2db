"""Human-friendly names for what torch calls things."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable

from dynscope.model.break_text import first_line

__all__ = ["condensed", "first_line", "friendly_function", "location", "plural", "short_location", "short_path",
           "stdlib_path", "torch_frame_location"]

_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<function>.+)_at_(?P<line>\d+)$")


def friendly_function(name: str | None) -> str:
    """'torch_dynamo_resume_in_forward_at_24' -> 'forward, resumed after line 24'."""
    if not name:
        return "?"
    match = _RESUME.match(name)
    if match:
        return f"{friendly_function(match.group('function'))}, resumed after line {match.group('line')}"
    return name


def short_path(path: str | None, cwd: str | None = None) -> str:
    """A path relative to the run's directory when it is inside it; torch's own files by package."""
    if not path:
        return "?"
    if cwd and os.path.isabs(path):
        try:
            rel = os.path.relpath(path, cwd)
        except ValueError:
            rel = path
        if not rel.startswith(".."):
            return rel
    marker = f"{os.sep}site-packages{os.sep}"
    if marker in path:
        return path.split(marker, 1)[1]
    return stdlib_path(path) or path


# The standard library of any CPython on POSIX (/usr/lib/python3.11, ~/.pyenv/versions/3.11.7/lib/python3.11,
# /opt/conda/lib/python3.11): the recording machine's, which need not be the reader's.
_STDLIB = re.compile(r"/lib(?:64)?/python\d+\.\d+t?/(?!(?:site|dist)-packages/)(?P<rest>.+)$")


def stdlib_path(path: str) -> str | None:
    """``<stdlib>/logging/__init__.py`` for a file of Python's standard library, else None: the
    interpreter's absolute path says nothing the module's name does not (site-packages files are
    shown by package for the same reason)."""
    match = _STDLIB.search(path) if os.path.isabs(path) else None
    return f"<stdlib>/{match['rest']}" if match else None


def command_line(argv: Iterable[object]) -> str:
    """A recorded command as one shell line, quoted so it reads back as the exact argv."""
    return shlex.join(str(a) for a in argv) or "?"


def location(path: str | None, line: int | None, cwd: str | None = None) -> str:
    return f"{short_path(path, cwd)}:{line}" if line is not None else short_path(path, cwd)


_TORCH_FRAME = re.compile(r"^(?P<file>.+):(?P<line>\d+) in (?P<function>.+)$")


def torch_frame_location(text: str, known_files: Iterable[str], cwd: str | None = None) -> str:
    """torch's short frame text ('model.py:12 in forward', in guard trees) with the file the
    capture knows, shown as `location` shows files.

    torch shortens the path by its common path with torch's install directory, and where that
    is the root it cuts one character too many ('mp/proj/model.py' for /tmp/proj/model.py), so
    what it prints depends on where torch is installed. A file of the run that ends with it
    names it; text that matches none is shown as torch wrote it.
    """
    match = _TORCH_FRAME.match(text)
    if match is None or os.path.isabs(match["file"]):
        return text
    short = match["file"]
    candidates = [f for f in known_files if f and os.path.isabs(f)]
    found = (next((f for f in candidates if f.endswith(os.sep + short)), None)
             or next((f for f in candidates if f.endswith(short)), None))
    if found is None:
        return text
    return f"{location(found, int(match['line']), cwd)} in {match['function']}"


def short_location(path: str | None, line: int | None) -> str:
    """'graph_breaks.py:20': the file's name and the line, for narrow places (tree labels) where a
    longer path would be cut and leave a wrong line number ('…py:2')."""
    name = os.path.basename(path) if path else "?"
    return f"{name}:{line}" if line is not None else name


def condensed(message: str | None, lines: int = 2) -> str:
    """The informative lines of a torch message, without its boilerplate about verbose logging."""
    kept = [line.strip() for line in (message or "").splitlines()
            if line.strip() and not line.strip().startswith(("Set TORCHDYNAMO_VERBOSE", "You can suppress this"))]
    return " ".join(kept[:lines])


def plural(count: int, noun: str, many: str | None = None) -> str:
    """'1 error', '2 errors', '1 recompile-limit hit'; ``many`` for irregular plurals."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def seconds_text(value: float) -> str:
    """A measured time in the unit that reads best: '0.61 s', '31 ms', '45 µs'."""
    if value >= 1.0:
        return f"{value:.2f} s" if value < 100 else f"{value:.0f} s"
    if value >= 0.01:
        return f"{value:.2f} s" if value >= 0.1 else f"{value * 1e3:.0f} ms"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} µs"


# What "2 attempts" on a compile means, said wherever a count of attempts is shown.
ATTEMPTS_MEANING = ("attempts: how many times Dynamo traced the frame within one compile; it restarts the "
                    "analysis after a graph break (to compile the code before the break, which then runs the "
                    "break in eager) or after a speculation that failed, and the last attempt is what compiled")


def attempts_note(attempts: int, restart_reasons: tuple[str, ...] = ()) -> str:
    """'2 attempts: Dynamo restarted its analysis once, after: Failed to trace builtin operator'."""
    times = "once" if attempts == 2 else f"{attempts - 1} times"
    why = f", after: {first_line(restart_reasons[0])}" if restart_reasons else ""
    return f"{attempts} attempts: Dynamo restarted its analysis {times}{why}"
