"""Real multi-node shape: two torchrun "nodes" on this machine (c10d rendezvous on localhost,
gloo), each under `dynscope explain`, with TORCH_TRACE on as a cluster job would have it.
All ranks' captures are read together, and the logs imported give the same divergence."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_dynscope

PROGRAM = Path(__file__).parent.parent / "programs" / "rank_divergence.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def explain_under_torchrun(tmp_path: Path, launch: list[str], *, trace: bool = True) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", *launch,
         "-m", "dynscope", "explain", "-q", "-o", str(tmp_path / "run.dynscope"), str(PROGRAM)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **({"TORCH_TRACE": str(tmp_path / "logs")} if trace else {})},
    )


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("nodes")
    endpoint = f"localhost:{free_port()}"
    nodes = [explain_under_torchrun(tmp_path, ["--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "1",
                                               "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                                               "--rdzv-id", "dynscope-test"])
             for node in (0, 1)]
    try:
        outputs = [node.communicate(timeout=300) for node in nodes]
    finally:  # one node failing leaves the other waiting at the rendezvous
        for node in nodes:
            if node.poll() is None:
                node.kill()
    for node, (_, err) in zip(nodes, outputs):
        assert node.returncode == 0, err[-3000:]
    return tmp_path


def summary_set(*paths: Path) -> dict:
    result = run_dynscope("summary", "--json", *map(str, paths))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_two_nodes_divergence_from_explain_and_from_imported_logs(two_nodes):
    captures = [two_nodes / f"run.rank{r}.dynscope" for r in (0, 1)]
    explained = summary_set(*captures)
    assert explained["schema"] == "dynscope.summary-set/1"
    assert [(s["ranks"][0]["rank"], s["ranks"][0]["world_size"]) for s in explained["summaries"]] == [(0, 2), (1, 2)]
    first = explained["divergence"][0]
    assert (first["what"], first["ranks"], Path(first["file"]).name, first["line"], first["first"]) == \
        ("graph_break", [1], "rank_divergence.py", 18, True)
    assert first["detail"].endswith("hang risk")
    kinds = {d["what"]: d for d in explained["divergence"]}
    assert kinds["recompile"]["ranks"] == [1] and kinds["collective"]["ranks"] == [1]

    result = run_dynscope("import", str(two_nodes / "logs"), "-o", str(two_nodes / "imported.dynscope"))
    assert result.returncode == 0, result.stderr
    imported = summary_set(*(two_nodes / f"imported.rank{r}.dynscope" for r in (0, 1)))
    key = lambda d: (d["what"], d["ranks"], d["file"], d["line"], d["function"], d["first"])  # noqa: E731
    assert [key(d) for d in imported["divergence"]] == [key(d) for d in explained["divergence"]]


def test_timeline_of_both_nodes(two_nodes):
    out = two_nodes / "trace.json"
    result = run_dynscope("timeline", *(str(two_nodes / f"run.rank{r}.dynscope") for r in (0, 1)), "-o", str(out))
    assert result.returncode == 0, result.stderr
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from chrome_trace import validate_trace

    events = validate_trace(json.loads(out.read_text()))
    assert {e["pid"] for e in events} == {0, 1}
    assert {e["cat"] for e in events if e["ph"] == "B"} >= {"dynamo"}


def test_eight_ranks_read_together(tmp_path):
    # Only the captures are read here (the two nodes above run with TORCH_TRACE on): without it the
    # test session's fork pool can start the eight recording children (torch reads TORCH_TRACE as it imports).
    run = explain_under_torchrun(tmp_path, ["--standalone", "--nproc-per-node", "8"], trace=False)
    try:
        _, err = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err[-3000:]
    captures = [tmp_path / f"run.rank{r}.dynscope" for r in range(8)]
    start = time.perf_counter()
    doc = summary_set(*captures)
    print(f"summary --json of 8 ranks: {time.perf_counter() - start:.2f} s")  # reported, not asserted
    assert len(doc["summaries"]) == 8
    first = doc["divergence"][0]
    assert (first["what"], first["ranks"], first["line"]) == ("graph_break", [1], 18)
    assert "where the other ranks issue all_reduce" in first["detail"]
