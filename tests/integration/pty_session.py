"""Run a command on a pseudo-terminal of a given size, as a user at a terminal would, and read
everything it printed there (stdout and stderr share the terminal)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|[78]|\][^\x07]*\x07)")


@dataclass(frozen=True)
class Screen:
    raw: str  # what the terminal received, escapes included
    returncode: int

    @property
    def program_text(self) -> str:
        """``text`` without what was drawn between a saved and a restored cursor (a status line
        drawn on a row of its own): what is left is what printed line after line."""
        return _plain(re.sub(r"\x1b7.*?\x1b8", "", self.raw, flags=re.S))

    @property
    def text(self) -> str:
        """The output without escape sequences, carriage returns as line ends (a redrawn status line
        becomes lines of its own)."""
        return _plain(self.raw)


def run_in_pty(args: list[str], *, cwd: str | os.PathLike, columns: int = 80, rows: int = 24,
               timeout: float = 600, env: dict[str, str] | None = None) -> Screen:
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    environment = {**os.environ, "COLUMNS": str(columns), "LINES": str(rows), "TERM": "xterm-256color", **(env or {})}
    environment.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "dynscope", *args], cwd=cwd, stdin=secondary, stdout=secondary,
                            stderr=secondary, env=environment, start_new_session=True)
    os.close(secondary)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(primary, 65536)
            except OSError:  # EIO: every descriptor of the terminal's other side is closed
                break
            if not data:
                break
            chunks.append(data)
        else:
            proc.kill()
    finally:
        os.close(primary)
    returncode = proc.wait(timeout=30)
    return Screen(b"".join(chunks).decode("utf-8", "replace"), returncode)


def _plain(raw: str) -> str:
    return _ANSI.sub("", raw).replace("\r\n", "\n").replace("\r", "\n")
