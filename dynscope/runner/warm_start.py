"""``explain --warm``: run the program cold, then warm, with the compile caches on and shared.

Both runs use one fresh temporary cache directory (Inductor's and Triton's, set in the child
spec, so the user's environment and their own caches play no part): the cold run fills it, the
warm run -- a fresh process, as a restarted job would be -- reads it. The warm run is the
capture (``-o``), with the user's stdin and terminal; the cold run is recorded beside it as
``<capture stem>.cold.dynscope`` and named in the warm capture by a ``dynscope:warm_start``
event, so the views can compare the two (what warm saved, what it still compiled and why).
The cold run's output is kept out of the terminal (the user sees the program's output once)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from dynscope.events import WarmStart, write
from dynscope.runner.cache_dirs import private_cache_dir
from dynscope.runner.launcher import RunResult, launch
from dynscope.runner.program import Program
from dynscope.runner.spec import ChildSpec
from dynscope.store.schema import FILE_SUFFIX
from dynscope.store.writer import CaptureWriter

COLD_SUFFIX = ".cold" + FILE_SUFFIX


def cold_capture_path(warm_path: str) -> str:
    """``run.dynscope`` -> ``run.cold.dynscope``, beside it."""
    stem = warm_path[: -len(FILE_SUFFIX)] if warm_path.endswith(FILE_SUFFIX) else warm_path
    return stem + COLD_SUFFIX


def record_warm_start(program: Program, path: str, *, command: tuple[str, ...], profile: bool,
                      announce: bool) -> RunResult:
    """Run cold then warm; returns the warm run's result (the one ``explain`` reports)."""
    cold_path = cold_capture_path(path)
    with private_cache_dir("warm") as cache_dir:
        if announce:
            print("dynscope: --warm: the cold run (caches on, in a fresh cache directory)...", file=sys.stderr)
        started = time.time()
        cold = launch(ChildSpec(program, cold_path, command, keep_caches=True, profile=profile, cache_dir=cache_dir),
                      popen_kwargs={"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL,
                                    "stderr": subprocess.DEVNULL})
        cold_elapsed = time.time() - started
        if announce:
            print("dynscope: --warm: the warm run (a fresh process, the same caches)...", file=sys.stderr)
        started = time.time()
        warm = launch(ChildSpec(program, path, command, keep_caches=True, profile=profile, cache_dir=cache_dir))
        warm_elapsed = time.time() - started
    if warm.capture_written:
        writer = CaptureWriter.reopen(path)
        try:
            write(writer, WarmStart(cold_capture=os.path.basename(cold_path) if cold.capture_written else "",
                                    cold_exit_code=cold.returncode, cold_elapsed_s=cold_elapsed,
                                    warm_elapsed_s=warm_elapsed))
        finally:
            writer.close()
    return warm
