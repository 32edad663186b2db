"""minify's runs share one private compile-cache directory (issue 42, item 2).

The detection run, the check workers and the repro's proof all compile in one directory of the
session's own (dynscope.runner.cache_dirs.private_cache_dir), removed at the end: a graph checked
again unchanged loads from it, a changed graph misses and is compiled, and the user's own cache
directory is neither read nor written.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, as_a_user_runs

from dynscope.minifier.worker import Worker
from dynscope.probes.fx_graphs import serialize_graph

MODEL = REPO / "tests" / "programs" / "minify_model.py"

pytestmark = pytest.mark.inductor


def _tree(directory: Path) -> dict[str, str]:
    """Every file and folder under ``directory``: its path, and the sha256 of a file's bytes."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(directory.rglob("*"))}


def test_minify_leaves_the_users_cache_directory_as_it_was_and_removes_its_own(tmp_path):
    """The user's cache, filled by a plain run of the program, is byte for byte the same after a
    minify of its compile error (the runs are a user's: without the test suite's kernel-build
    setting), and the private directory minify compiled in is gone."""
    users = tmp_path / "users-cache"
    private_parent = tmp_path / "tmp"  # where the private directory is made (TMPDIR): seen removed
    private_parent.mkdir()
    env = as_a_user_runs({"TORCHINDUCTOR_CACHE_DIR": str(users), "TRITON_CACHE_DIR": str(users / "triton"),
                          "TMPDIR": str(private_parent)})
    plain = subprocess.run([sys.executable, str(MODEL), "--mlp"], capture_output=True, text=True, timeout=600,
                           env=env, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr[-3000:]
    before = _tree(users)
    assert any(name.endswith(".py") for name in before)  # the plain run filled the user's cache

    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "dynscope", "minify", "-q", "--out", str(out), str(MODEL), "--mlp",
                           "--bug", "compile_error"], capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads((out / "result.json").read_text())
    assert result["verified"] and result["culprit_backend"] == "inductor"  # it compiled, checked and proved
    assert _tree(users) == before
    assert not [p.name for p in private_parent.iterdir() if p.name.startswith("dynscope-")]  # the private one is gone


def _fragment(fn, *inputs):
    from dynscope.minifier.fragment import Fragment
    from dynscope.minifier.rebuild import describe_input

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(Fragment(json.loads(json.dumps(serialize_graph(gm))), [describe_input(x) for x in example_inputs]))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*inputs)
    return graphs[0]


def _entries(cache_dir: Path) -> set[str]:
    """The FX graph cache's entries in ``cache_dir``: a miss adds one, a hit adds none."""
    return {str(p.relative_to(cache_dir)) for p in (cache_dir / "fxgraph").rglob("*") if p.is_file()}


def test_checks_of_an_unchanged_graph_hit_the_shared_directory_and_a_changed_graph_misses(tmp_path):
    """Workers given a cache directory compile there (the fork server's and a fresh worker's
    alike): checking a graph again, in a new worker process, adds no cache entry (a hit); a
    changed graph adds one (a miss)."""
    x = torch.randn(8)
    same = _fragment(lambda t: (t.cos() + 1).relu(), x)
    changed = _fragment(lambda t: (t.sin() * 3).relu(), x)

    def check(fragment):
        return {"op": "check", "fragment": fragment.to_json(), "backend": {"name": "inductor"}, "configs": {},
                "grad_enabled": False, "accuracy": None}

    for fork in (True, False):
        cache_dir = tmp_path / ("forked" if fork else "fresh")
        cache_dir.mkdir()
        worker = Worker(str(tmp_path / f"worker-{fork}.log"), fork=fork, cache_dir=str(cache_dir))
        try:
            first = worker.request(check(same), timeout=600)
            assert first.data is not None and first.data["signature"] is None, first
            filled = _entries(cache_dir)
            assert filled, "the check compiled into the directory it was given"
            pid = worker.request({"op": "ping"}, timeout=60).data["pid"]
            worker.request(check(same), timeout=0.001)  # too short: ends the worker, the next check gets a new one
            again = worker.request(check(same), timeout=600)
            assert again.data is not None and again.data["signature"] is None, again
            assert worker.request({"op": "ping"}, timeout=60).data["pid"] != pid
            assert _entries(cache_dir) == filled  # a hit: nothing compiled again
            other = worker.request(check(changed), timeout=600)
            assert other.data is not None and other.data["signature"] is None, other
            assert _entries(cache_dir) > filled  # a miss: the changed graph was compiled and stored
        finally:
            worker.close()
