"""Captures of the program's child processes, beside the program's own, like ranks.

A process the program forks (``os.fork``, a ``fork`` multiprocessing worker) or starts through
multiprocessing's ``spawn``/``forkserver`` records what it compiles into a capture of its own:
``run.dynscope`` -> ``run.pid1234.dynscope``. The file is created by the child's first event, so
a worker that compiles nothing (a DataLoader worker) leaves none. After the run the launcher
finds them (``find_child_captures``) and lists them in the program's capture.
"""

from __future__ import annotations

import os
import sqlite3
import stat

from dynscope.errors import CaptureError
from dynscope.events import ChildCapture
from dynscope.store.reader import CaptureReader
from dynscope.store.schema import FILE_SUFFIX

# A directory may hold captures of many earlier runs; each candidate is opened to read its meta.
_MAX_CANDIDATES = 1000


def child_capture_path(root_path: str, pid: int) -> str:
    base, ext = os.path.splitext(root_path)
    return f"{base}.pid{pid}{ext or FILE_SUFFIX}"


def children_of_run(root_path: str, root_pid: int) -> list[ChildCapture]:
    """The child captures of the run the program (pid ``root_pid``) recorded into ``root_path``."""
    try:
        with CaptureReader(root_path) as reader:
            started = reader.meta.get("started")
    except (CaptureError, OSError, ValueError, RecursionError, sqlite3.Error):
        return []
    if not isinstance(started, float):
        return []
    return find_child_captures(root_path, root_pid=root_pid, root_started=started)


def find_child_captures(root_path: str, *, root_pid: int, root_started: float) -> list[ChildCapture]:
    """The captures beside ``root_path`` written by children of this run: named
    ``<base>.pid<N><ext>`` and saying so in their meta (the program's pid and start time, which a
    file left by another run, or planted, does not have)."""
    directory = os.path.dirname(root_path) or "."
    base, ext = os.path.splitext(os.path.basename(root_path))
    prefix, suffix = base + ".pid", ext or FILE_SUFFIX
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    found = []
    pids = {n: n[len(prefix):len(n) - len(suffix)] for n in names if n.startswith(prefix) and n.endswith(suffix)}
    candidates = [n for n, pid in pids.items() if pid.isascii() and pid.isdigit()]
    for name in candidates[:_MAX_CANDIDATES]:
        path = os.path.join(directory, name)
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):  # never a link, a FIFO or a device
                continue
            with CaptureReader(path) as reader:
                meta = reader.meta
                if meta.get("root_pid") != root_pid or meta.get("root_started") != root_started:
                    continue
                compiles = len({cid for cid, _ in reader.compile_event_names()})
        except (CaptureError, OSError, ValueError, RecursionError, sqlite3.Error):
            continue  # not one of ours, or damaged: the program's capture does not vouch for it
        found.append(ChildCapture(file=name, pid=int(pids[name]), compiles=compiles))
    return found
