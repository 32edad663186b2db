"""``explain --vs-eager``: run the program a second time with compilation off and add that
run's timings to the first run's capture, so every view can say what compiling bought.

The twin run is the same program, arguments and working directory, profiled the same way,
with every torch.compile'd function forced to eager. Its output is kept out of the user's
terminal (they saw the program's output once); its exit status is recorded, so the views
can say when the two runs are not comparable.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from typing import Any

from dynscope.errors import CaptureError
from dynscope.events import EagerTwinRun, RuntimeSnapshot, write
from dynscope.runner.launcher import launch
from dynscope.runner.program import Program
from dynscope.runner.spec import ChildSpec
from dynscope.store.reader import CaptureReader
from dynscope.store.schema import FILE_SUFFIX
from dynscope.store.writer import CaptureWriter

_OUTPUT_TAIL = 2000


def record_eager_twin(program: Program, capture_path: str, *, command: list[str]) -> int:
    """Run the eager twin and store its profile in ``capture_path``; returns its exit status."""
    with tempfile.TemporaryDirectory(prefix="dynscope-eager-") as tmp:
        twin_path = os.path.join(tmp, "eager" + FILE_SUFFIX)
        output_path = os.path.join(tmp, "output")
        started = time.time()
        with open(output_path, "wb") as output:
            spec = ChildSpec(program, twin_path, tuple(command), keep_caches=True, profile=True, force_eager=True)
            result = launch(spec, popen_kwargs={"stdin": subprocess.DEVNULL, "stdout": output, "stderr": output})
        elapsed = time.time() - started
        profile = _last_profile(twin_path) if result.capture_written else None
        with open(output_path, "rb") as output:
            output.seek(max(0, os.path.getsize(output_path) - _OUTPUT_TAIL))
            tail = output.read().decode("utf-8", "replace")
    writer = CaptureWriter.reopen(capture_path)
    try:
        write(writer, EagerTwinRun(exit_code=result.returncode, elapsed_s=elapsed, output_tail=tail),
              None if profile is None else json.dumps(profile, separators=(",", ":")))
    finally:
        writer.close()
    return result.returncode


def _last_profile(path: str) -> dict[str, Any] | None:
    try:
        with CaptureReader(path) as reader:
            return reader.last_json_object(RuntimeSnapshot.KIND)
    except CaptureError:
        return None
