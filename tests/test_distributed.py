"""Under torchrun every rank records its own capture; only rank 0 speaks unless asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dynscope.model import Capture

PROGRAM = Path(__file__).parent / "programs" / "distributed_step.py"


def torchrun(tmp_path: Path, *explain_options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "dynscope", "explain", *explain_options, "-o", str(tmp_path / "run.dynscope"), str(PROGRAM)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("dist")
    return tmp_path, torchrun(tmp_path)


def test_each_rank_writes_its_own_capture_with_rank_and_world_size(two_ranks):
    tmp_path, result = two_ranks
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        capture = Capture.open(str(tmp_path / f"run.rank{rank}.dynscope"))
        assert (capture.run.rank, capture.run.world_size) == (rank, 2)
        assert [c.status for c in capture.compiles()][0] == "ok"
    # The ranks really differ: only rank 1 took the print() graph break.
    assert not Capture.open(str(tmp_path / "run.rank0.dynscope")).graph_breaks()
    breaks = Capture.open(str(tmp_path / "run.rank1.dynscope")).graph_breaks()
    assert [b.gb_type for b in breaks] == ["Failed to trace builtin operator"]


def test_only_rank_zero_prints_the_summary(two_ranks):
    _, result = two_ranks
    assert result.stderr.count("dynscope · torch") == 1
    assert "rank 0 of 2" in result.stderr
    assert "rank 0: [" in result.stdout and "rank 1: [" in result.stdout


def test_all_ranks_flag_makes_every_rank_speak(tmp_path):
    result = torchrun(tmp_path, "--all-ranks")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("dynscope · torch") == 2
