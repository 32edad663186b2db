"""The directory an MCP server serves: every path a client names must resolve inside it.

A client (an agent, or whoever feeds it text) names captures, scripts and output files; a
capture from a stranger names paths too. Nothing outside the served directory is read, run or
written through the server: a path is taken relative to the directory, resolved with its links
(realpath), and refused when it ends up elsewhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dynscope.errors import DynscopeError

# What list_captures reads: a huge tree must not stall the server.
MAX_LISTED_ENTRIES = 20_000
MAX_LISTED_CAPTURES = 500


class OutsideServedDirectory(DynscopeError):
    pass


@dataclass(frozen=True)
class ServedDirectory:
    root: str  # absolute and resolved

    @classmethod
    def at(cls, path: str) -> ServedDirectory:
        if not os.path.isdir(path):
            raise DynscopeError(f"--root {path}: not a directory")
        return cls(os.path.realpath(path))

    def resolve(self, path: str, *, what: str = "path") -> str:
        """``path`` (relative to the root, or absolute) as a real path inside the root."""
        if not isinstance(path, str) or not path or "\0" in path:
            raise OutsideServedDirectory(f"{what} must be a non-empty path without NUL characters")
        real = os.path.realpath(os.path.join(self.root, path))
        if os.path.commonpath([real, self.root]) != self.root:
            raise OutsideServedDirectory(f"{what} {path!r} is outside the directory this server serves ({self.root}); "
                                         "give a path inside it")
        return real

    def existing_file(self, path: str, *, what: str) -> str:
        real = self.resolve(path, what=what)
        if not os.path.isfile(real):
            raise DynscopeError(f"no such {what}: {path}")
        return real

    def capture(self, path: str) -> str:
        """A capture file inside the root, told by its SQLite header (not by its name)."""
        from dynscope.store.header import is_capture_file

        real = self.existing_file(path, what="capture")
        if not is_capture_file(real):
            raise DynscopeError(f"{path} is not a dynscope capture")
        return real

    def relative(self, real: str) -> str:
        return os.path.relpath(real, self.root)

    def captures(self) -> tuple[list[str], bool]:
        """Capture files under the root (links not followed), relative to it; and whether the
        walk stopped at its limits before seeing everything."""
        from dynscope.store.header import is_capture_file

        found: list[str] = []
        seen = 0
        for directory, subdirectories, files in os.walk(self.root):
            subdirectories.sort()
            for name in sorted(files):
                seen += 1
                if seen > MAX_LISTED_ENTRIES or len(found) >= MAX_LISTED_CAPTURES:
                    return found, True
                path = os.path.join(directory, name)
                if name.endswith(("-wal", "-shm", "-journal", ".lock")) or os.path.islink(path):
                    continue
                if os.path.isfile(path) and is_capture_file(path):
                    found.append(self.relative(path))
        return found, False
