"""Under torchrun every rank records its own capture; only rank 0 speaks unless asked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_dynscope

from dynscope.model import Capture

PROGRAM = Path(__file__).parent.parent / "programs" / "distributed_step.py"


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


def test_one_report_across_ranks_shows_where_they_differ(two_ranks):
    tmp_path, _ = two_ranks
    ranks = [str(tmp_path / f"run.rank{rank}.dynscope") for rank in (0, 1)]
    result = run_dynscope("report", *ranks, "-o", str(tmp_path / "ranks.html"))
    assert result.returncode == 0, result.stderr
    html = (tmp_path / "ranks.html").read_text()
    differences = html.split('id="rank-differences"', 1)[1].split("</section>", 1)[0]
    # The print() break happened on rank 1 only, and the report says so.
    assert re.search(r"graph break</td><td><code>Failed to trace builtin operator at [^<]*distributed_step.py:\d+"
                     r"</code></td><td>rank 1</td>", differences)
    assert 'data-rank-tab="r0">rank 0<' in html and 'data-rank-tab="r1">rank 1<' in html


def test_a_run_forked_by_the_test_pool_has_the_thread_count_torchrun_gives_it(tmp_path):
    """torchrun sets OMP_NUM_THREADS=1 for several ranks on one host; the session's fork pool
    (dynscope/runner/fork_pool.py) imported torch without it, so its copy must tell torch, and the
    program must see what it sees in a fresh python (on more than one core, fewer threads than the pool)."""
    count = "import torch; print(torch.get_num_threads())"
    fresh = subprocess.run([sys.executable, "-c", count], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
    program = tmp_path / "threads.py"
    program.write_text(f"import sys\n{count}\nprint('dynscope.runner.fork_pool' in ' '.join(sys.orig_argv))\n")
    result = run_dynscope("explain", "-q", "-o", str(tmp_path / "run.dynscope"), str(program), cwd=tmp_path,
                          env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == [fresh.stdout.strip(), "True"]  # python's count, in a copy of the pool
