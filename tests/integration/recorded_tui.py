"""The recorded captures the TUI's tests read (tests/data/tui, made by its record.sh): no test
compiles a program to have a capture to show. They were recorded from SNAPSHOT_ROOT, a copy of
the programs, so the screens show the same paths on every machine; the programs are copied
there again for the views that show source."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import REPO

RECORDED = REPO / "tests" / "data" / "tui"
SNAPSHOT_ROOT = Path("/tmp/dynscope-snapshots")
PROGRAMS = {"breaks": "examples/graph_breaks.py", "recompiles": "examples/recompiles.py",
            "markup": "tests/programs/tui_markup.py", "conv": "examples/conv_net.py"}


def snapshot_root() -> Path:
    """The programs, copied to SNAPSHOT_ROOT (file by file, atomically: xdist workers share it)."""
    for program in PROGRAMS.values():
        source, target = REPO / program, SNAPSHOT_ROOT / program
        if not target.exists() or target.read_bytes() != source.read_bytes():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(f".{os.getpid()}.partial")
            shutil.copyfile(source, partial)
            os.replace(partial, target)
    return SNAPSHOT_ROOT


def recorded(name: str) -> Path:
    """The recorded capture of ``PROGRAMS[name]`` (its program's source in place beside it)."""
    snapshot_root()
    return RECORDED / f"{name}.dynscope"
