"""How a forked child ends: as python would, minus the interpreter's teardown.

With torch (and a library such as transformers) imported, python's teardown (freeing every
module) takes 1 to 2 s on 2 cores, and ``dynscope fix`` waits for each run's exit: the
baseline, every trial, the combined run. What a program can see of an exit is kept: its
non-daemon threads are joined (where one still runs, python's own exit is used), its atexit
functions run, its exit status is python's, and its open files are flushed (a file the program
never closed keeps what it wrote). Only the finalizers that teardown alone would run (``__del__``
of module globals) are skipped.
"""

from __future__ import annotations

import atexit
import gc
import io
import os
import sys
import threading
from typing import NoReturn


def leave(ending: SystemExit) -> NoReturn:
    """End this process with ``ending``'s status, without python's teardown."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if others:
        raise ending  # python joins them first: its own exit does that
    status = exit_status(ending.code)
    atexit._run_exitfuncs()
    flush_open_files()
    os._exit(status)


def exit_status(code: object) -> int:
    """The status python exits with for ``sys.exit(code)`` (any other value is printed, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:  # noqa: BLE001  a stderr that cannot take it: the status still stands
        pass
    return 1


def flush_open_files() -> None:
    """Flush every open file object: text wrappers first (into their buffers), then the buffers."""
    for stream in (sys.stdout, sys.stderr):  # the outputs fix compares, whatever gc tracks
        try:
            stream.flush()
        except Exception:  # noqa: BLE001  closed or replaced by the program: as python would, go on
            pass
    objects = gc.get_objects()
    for kind in ((io.TextIOWrapper,), (io.BufferedWriter, io.BufferedRandom)):
        for obj in objects:
            if issubclass(type(obj), kind):  # type(), not isinstance: a dead weak proxy raises on __class__
                try:
                    if not obj.closed:
                        obj.flush()
                except Exception:  # noqa: BLE001  a detached or broken stream: python would skip it too
                    pass
