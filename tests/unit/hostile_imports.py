"""Forging hostile TORCH_TRACE logs, lock files and cut captures for the import/writer tests
(issue 20, items 4, 7, 8, 13). Nothing here imports torch."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "torch_trace"
GRAPH_BREAKS_LOG = next((DATA / "graph_breaks_eager").glob("*.log.gz"))

HEADER = b"V1123 22:29:31.219000 6165 torch/_dynamo/x.py:1] "
# Raw control bytes a terminal would act on (tab and newline are text).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
MB = 1024 * 1024


def real_log() -> bytes:
    """A recorded TORCH_TRACE log (5 compiles, 4 graph breaks), uncompressed."""
    return gzip.decompress(GRAPH_BREAKS_LOG.read_bytes())


def artifact_event(name: str, payload: bytes) -> bytes:
    """One well-formed artifact event with its tab-indented payload and the right md5."""
    digest = hashlib.md5(payload, usedforsecurity=False).hexdigest()
    lines = b"".join(b"\t" + line + b"\n" for line in payload.split(b"\n"))
    return (HEADER + b'{"artifact": {"name": "' + name.encode() + b'", "encoding": "string"}, "frame_id": 0, '
            b'"frame_compile_id": 0, "attempt": 0, "has_payload": "' + digest.encode() + b'"}\n' + lines)


def gzip_with_huge_line(path: Path, line_bytes: int, *, before: bytes = b"", after: bytes = b"") -> Path:
    """A small gzip holding ``before``, then one line of ``line_bytes`` bytes (no newline inside:
    a header whose JSON never ends), then ``after``. Written as gzip members of 1 MiB each (a
    gzip reader reads them as one stream), so making it costs no 1 GiB buffer."""
    member = gzip.compress(b"A" * MB, 9)
    with open(path, "wb") as f:
        f.write(gzip.compress(before + HEADER + b'{"str": ["'))
        for _ in range(line_bytes // MB):
            f.write(member)
        f.write(gzip.compress(b'", 0]}\n' + after))
    return path


def gzip_with_huge_event(path: Path, event_bytes: int, *, after: bytes = b"") -> Path:
    """A small gzip holding one event whose payload is ``event_bytes`` of short lines (no line is
    long: only the event is)."""
    block = gzip.compress((b"\t" + b"A" * 14 + b"\n") * (MB // 16), 9)  # 1 MiB of 16-byte lines
    with open(path, "wb") as f:
        f.write(gzip.compress(HEADER + b'{"artifact": {"name": "huge", "encoding": "string"}, "has_payload": "x"}\n'))
        for _ in range(event_bytes // MB):
            f.write(block)
        f.write(gzip.compress(after))
    return path


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str
    rss: int  # peak resident memory of the dynscope process, bytes
    seconds: float


# The command runs under a small launcher, so its peak RSS is its own (as in test_hostile_captures).
_LAUNCHER = """
import resource, subprocess, sys
try:
    code = subprocess.call(sys.argv[3:], timeout=float(sys.argv[2]))
except subprocess.TimeoutExpired:
    code = 124
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=open(sys.argv[1], "w"))
sys.exit(code)
"""


def run_dynscope(args: list[str], cwd: Path, *, timeout: float = 60) -> Ran:
    """`python -m dynscope ARGS` in a fresh process: exit code (124: still running after
    ``timeout`` s, then killed), output, peak RSS and wall time."""
    out_path, err_path, rss_path = cwd / ".stdout", cwd / ".stderr", cwd / ".rss"
    started = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        code = subprocess.call([sys.executable, "-c", _LAUNCHER, str(rss_path), str(timeout),
                                sys.executable, "-m", "dynscope", *args],
                               cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                               env={**os.environ, "COLUMNS": "120"})
    ran = Ran(code, out_path.read_text("utf-8", "replace"), err_path.read_text("utf-8", "replace"),
              int(rss_path.read_text()), time.monotonic() - started)
    for p in (out_path, err_path, rss_path):
        p.unlink()
    return ran


def one_line_error(ran: Ran, code: int = 2) -> str:
    """The single stderr line of a refused command (asserting the documented shape)."""
    assert ran.code == code, (ran.code, ran.err)
    assert ran.err.count("\n") == 1 and ran.err.startswith("dynscope: "), ran.err
    assert "Traceback" not in ran.err and "internal error" not in ran.err
    assert not CONTROL.search(ran.out + ran.err)
    return ran.err.strip()


def tree_state(root: Path, *, skip: tuple[Path, ...] = ()) -> dict[str, tuple]:
    """Every entry under ``root`` (not following links): kind, size, mtime and, for files, a hash."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if any(p == s or s in p.parents for s in skip):
                continue
            st = p.lstat()
            digest = None
            if p.is_file() and not p.is_symlink():
                digest = hashlib.blake2b(p.read_bytes(), digest_size=16).hexdigest()
            elif p.is_symlink():
                digest = os.readlink(p)
            state[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return state


_KILLED_WRITER = """
import os, signal, sys
from dynscope.store.writer import CaptureWriter
w = CaptureWriter(sys.argv[1])
w.set_meta(dynscope_version="0", command=["prog.py"], started=1.0)
w.append("dynscope:run_start", {"argv": ["prog.py"]})
for i in range(3):
    w.append("dynamo_start", {"dynamo_start": {"stack": [{"line": 3, "name": "f", "filename": 0}]}},
             compile_id=f"{i}/0", attempt=0)
os.kill(os.getpid(), signal.SIGKILL)
"""


def capture_of_a_killed_writer(path: Path) -> Path:
    """A capture whose writing process was SIGKILLed before it could close it (dynscope itself
    killed, not only the program: nothing outlived it to record the end)."""
    done = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(path)], capture_output=True, timeout=60)
    assert done.returncode == -9, done.stderr
    return path
