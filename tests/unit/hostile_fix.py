"""Forging what ``dynscope fix --from`` reads: a capture whose recorded command and working
directory are the attacker's, written by the real writer (nothing here imports torch)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from dynscope.store.writer import CaptureWriter

# Raw control bytes that must never reach a terminal: C0 (but tab/newline), DEL, C1, bidi overrides.
CONTROL = [chr(c) for c in range(0x20) if c not in (9, 10)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xa0)] + \
    ["\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u202a", "\u202b", "\u202c", "\u202d", "\u200e", "\u200f"]


def recorded_capture(path: Path, command: list, cwd) -> Path:
    """A capture of a run of ``command`` in ``cwd`` (``dynscope explain`` + command, as recorded)."""
    writer = CaptureWriter(path)
    writer.set_meta(dynscope_version="0", torch_version="2.13.0", python="3.11", cwd=cwd,
                    command=["dynscope", "explain", *command], started=1.0, finished=2.0, exit_code=0)
    writer.append("dynscope:graph_break", {"gb_type": "x", "reason": "x", "explanation": "x", "hints": [],
                                           "user_stack": [{"file": "prog.py", "line": 3, "function": "f",
                                                           "code": "x"}]},
                  compile_id="0/0", attempt=0)
    writer.close()
    return path


def marker_program(directory: Path, marker: Path) -> Path:
    """A script that creates ``marker`` when it runs: proof that a recorded command ran."""
    script = directory / "evil.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    return script


# The command runs under a small launcher, so the peak RSS measured is its own (as in
# tests/unit/test_hostile_captures.py).
_LAUNCHER = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=open(sys.argv[1], "w"))
sys.exit(code)
"""

last_rss: list[int] = []  # the peak RSS in bytes of the last run_fix without a terminal


def run_fix(args: list[str], cwd: Path, *, stdin=subprocess.DEVNULL, timeout: float = 60,
            answer: bytes | None = None) -> tuple[int, str, float]:
    """``dynscope fix ARGS`` in a fresh process: (exit code, stdout + stderr, seconds); its peak
    RSS goes to ``last_rss``. With ``answer``, stdin is a terminal (a pty) that types it."""
    started = time.time()
    if answer is None:
        rss_path = cwd.parent / "rss.txt"
        done = subprocess.run([sys.executable, "-c", _LAUNCHER, str(rss_path), sys.executable, "-m", "dynscope",
                               "fix", *args], cwd=cwd, stdin=stdin, capture_output=True, timeout=timeout)
        last_rss[:] = [int(rss_path.read_text())]
        return done.returncode, (done.stdout + done.stderr).decode("utf-8", "replace"), time.time() - started
    import pty

    primary, secondary = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "dynscope", "fix", *args], cwd=cwd, stdin=secondary,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.write(primary, answer)
        out, err = proc.communicate(timeout=timeout)
    finally:
        os.close(primary)
        os.close(secondary)
    return proc.returncode, (out + err).decode("utf-8", "replace"), time.time() - started


def raw_controls(text: str) -> list[str]:
    return sorted({repr(c) for c in text if c in CONTROL})


def tree(directory: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``directory`` with its size and mtime: what a command may not change."""
    found = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            found[os.path.relpath(path, directory)] = (st.st_size, st.st_mtime_ns)
    return found
