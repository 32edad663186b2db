"""What a minify run leaves in its output directory, and the crash marker's format.

Torch-free: the parent reads these files; the detection run's probe writes them.
"""

from __future__ import annotations

import mmap
import struct

FAILURE_FILE = "failure.json"  # the first failure the probe saw (minifier/probe.py)
VALUES_FILE = "inputs.pt"  # its input values, when the failure may depend on them
GRAPHS_DIR = "graphs"  # every graph the program compiled, as <index>.json
MARKER_FILE = "marker"  # which graph the program is compiling or running right now
CHECKS_FILE = "checks.jsonl"  # every check made, for --resume
RESULT_FILE = "result.json"
PROGRAM_LOG = "program.log"
WORKER_LOG = "worker.log"
VERIFY_LOG = "verify.log"
VERDICT_FILE = "verified.json"  # the repro's last proof in a fresh process, for --resume (minifier/verdicts.py)

IDLE, COMPILING, RUNNING = 0, 1, 2
_FORMAT = "<iii"  # graph index, state, sequence number
_SIZE = struct.calcsize(_FORMAT)


class Marker:
    """(graph, state, sequence) in a 12-byte shared file: a struct pack per compiled call to
    write; read by the parent only when the program crashed or stopped answering."""

    def __init__(self, path: str) -> None:
        with open(path, "wb") as f:
            f.write(b"\0" * _SIZE)
        self._file = open(path, "r+b")
        self._map = mmap.mmap(self._file.fileno(), _SIZE)
        self._seq = 0
        self.set(-1, IDLE)

    def set(self, graph: int, state: int) -> None:
        self._seq += 1
        struct.pack_into(_FORMAT, self._map, 0, graph, state, self._seq)


def read_marker(path: str) -> tuple[int, int, int] | None:
    try:
        with open(path, "rb") as f:
            data = f.read(_SIZE)
    except OSError:
        return None
    return struct.unpack(_FORMAT, data) if len(data) == _SIZE else None
