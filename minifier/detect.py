"""Run the user's program once, under the recorder and the failure probe, and say what failed.

The program runs in a recording child with the failure probe (minifier/child.py) with its output going to
``program.log``; this process watches the shared marker (minifier/probe.py) so that a
compile or a compiled call that runs past the timeout is stopped and named, and so that a
crash in generated code still says which graph it was in.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dynscope.minifier.case import Case, case_from_failure, case_from_graph_record
from dynscope.minifier.child import DetectionOptions
from dynscope.minifier.files import FAILURE_FILE, GRAPHS_DIR, MARKER_FILE, PROGRAM_LOG, read_marker
from dynscope.minifier.signature import crash_signature, hang_signature
from dynscope.runner.program import Program

if TYPE_CHECKING:
    from dynscope.runner.launcher import RunningChild


@dataclass
class Detection:
    case: Case | None
    capture_path: str
    returncode: int
    program_log: str
    compile_errors: list[Any] = field(default_factory=list)  # failures Dynamo raised before any backend ran


def detect(program: Program, out_dir: str, *, accuracy: dict[str, float] | None, timeout: float,
           command: list[str], on_status: Callable[[str], None], cache_dir: str | None = None) -> Detection:
    """``cache_dir``: the directory of the run's compile caches (minify's private one, which its
    checks then share); None: the user's own."""
    from dynscope.runner.launcher import launch
    from dynscope.runner.spec import ChildSpec

    stem = os.path.splitext(os.path.basename(program.target.rstrip("/")))[0] or "program"
    capture_path = os.path.join(out_dir, f"{stem}.dynscope")
    log_path = os.path.join(out_dir, PROGRAM_LOG)
    marker_path = os.path.join(out_dir, MARKER_FILE)
    watch = _Watch(marker_path, timeout, on_status)
    with open(log_path, "wb") as log:
        # Caches stay on, as in the user's own runs: Inductor's first compile in a process
        # takes twice as long without them, and a cache hit runs the same compiled code.
        spec = ChildSpec(program, capture_path, tuple(command), keep_caches=True, cache_dir=cache_dir,
                         extensions=(DetectionOptions(out_dir, accuracy).extension(),))
        result = launch(spec, popen_kwargs={"stdout": log, "stderr": log}, wait=watch.wait)
    detection = Detection(None, capture_path, result.returncode, log_path)
    failure_path = os.path.join(out_dir, FAILURE_FILE)
    if os.path.exists(failure_path):
        with open(failure_path) as f:
            detection.case = case_from_failure(json.load(f), out_dir)
    elif watch.stuck is not None or result.returncode < 0:
        detection.case = _case_at_marker(out_dir, watch, result.returncode, timeout)
    if detection.case is None and result.capture_written:
        detection.compile_errors = _dynamo_errors(capture_path)
    return detection


class _Watch:
    """``wait`` for the launcher: polls the child and stops it when one compile or compiled
    call of a graph outlasts the timeout."""

    def __init__(self, marker_path: str, timeout: float, on_status: Callable[[str], None]) -> None:
        self.marker_path = marker_path
        self.timeout = timeout
        self.on_status = on_status
        self.stuck: tuple[int, int] | None = None  # (graph, state) it was stopped in
        self.last_marker: tuple[int, int, int] | None = None

    def wait(self, proc: RunningChild) -> int:
        seen, since = None, time.monotonic()
        while True:
            try:
                return proc.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                pass
            marker = read_marker(self.marker_path)
            if marker is None:
                continue
            self.last_marker = marker
            graph, state, _ = marker
            if marker != seen:
                seen, since = marker, time.monotonic()
                if state:
                    self.on_status(f"graph {graph}: {'compiling' if state == 1 else 'running'}")
            elif state and time.monotonic() - since > self.timeout:
                self.stuck = (graph, state)
                proc.kill()
                return proc.wait()


def _case_at_marker(out_dir: str, watch: _Watch, returncode: int, timeout: float) -> Case | None:
    marker = read_marker(os.path.join(out_dir, MARKER_FILE)) or watch.last_marker
    if watch.stuck is not None:
        graph, signature = watch.stuck[0], hang_signature(timeout)
    elif marker is not None and marker[1]:
        graph, signature = marker[0], crash_signature(returncode)
    else:
        return None  # it died outside compiled code
    path = os.path.join(out_dir, GRAPHS_DIR, f"{graph}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        record = json.load(f)
    # Written down like the probe's failures, so that --resume starts from it.
    with open(os.path.join(out_dir, FAILURE_FILE), "w") as f:
        json.dump({**record, "kind": signature.kind, "signature": signature.to_json()}, f)
    return case_from_graph_record(record, signature)


def _dynamo_errors(capture_path: str) -> list[Any]:
    from dynscope.errors import DynscopeError
    from dynscope.model import Capture

    try:
        with Capture.open(capture_path) as capture:
            return capture.errors()
    except DynscopeError:
        return []
