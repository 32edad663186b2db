"""The compile caches on real Inductor runs of examples/warm_start.py (each compile costs seconds
on a CPU: two runs here, both needed). The parsing, key diff, compare and check logic is tested
without torch in tests/unit/test_caches.py, on captures recorded the same way."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from conftest import EXAMPLES, as_a_user_runs, run_dynscope

from dynscope.model import Capture

SETTING = "inductor_config[comment_origin]"


def _summary(path) -> dict:
    result = run_dynscope("summary", "--json", str(path))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_warm_runs_cold_then_warm_in_a_fresh_cache_directory(tmp_path):
    # The user's cache directory must not be the one used: the child spec sets a fresh one.
    users_cache = tmp_path / "users-cache"
    result = run_dynscope("explain", "--warm", "-o", str(tmp_path / "run.dynscope"), str(EXAMPLES / "warm_start.py"),
                          env={"TORCHINDUCTOR_CACHE_DIR": str(users_cache), "TRITON_CACHE_DIR": str(users_cache)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("sum: ") == 1  # the program's output once: the warm run's (the cold one's is kept out)
    assert "warm start: compile" in result.stderr
    assert not users_cache.exists()
    cold = _summary(tmp_path / "run.cold.dynscope")["caches"]
    assert {(x["layer"], x["state"]) for x in cold["lookups"]} == {("aotautograd", "miss"), ("fx_graph", "miss")}
    assert all(x["key_logged"] for x in cold["lookups"])  # AOTAutograd's key details too
    warm = _summary(tmp_path / "run.dynscope")["caches"]
    assert {(x["layer"], x["state"]) for x in warm["lookups"]} == {("aotautograd", "hit"), ("fx_graph", "hit")}
    assert warm["warm"]["cold_capture"] == "run.cold.dynscope" and warm["warm"]["cold_found"]
    (frame,) = warm["warm"]["frames"]
    assert frame["function"] == "scaled_gelu" and frame["warm_s"] < frame["cold_s"]


def test_a_changed_inductor_setting_is_named_as_the_reason_for_the_miss(tmp_path):
    cache = tmp_path / "cache"
    result = run_dynscope("explain", "--keep-caches", "-o", str(tmp_path / "run.dynscope"),
                          str(EXAMPLES / "warm_start.py"), "--then-comment-origin",
                          env={"TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton")})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "--keep-caches is the default now" in result.stderr  # the old flag: accepted, with one line
    assert f"{SETTING}: False → True" in result.stderr
    caches = _summary(tmp_path / "run.dynscope")["caches"]
    assert caches["changed_components"] == [SETTING]
    explained = [x for x in caches["lookups"] if x["changes"]]
    assert {x["layer"] for x in explained} == {"aotautograd", "fx_graph"}
    assert all(x["changes"] == [{"component": SETTING, "before": "False", "after": "True"}] for x in explained)


def _tree(directory: Path) -> dict[str, str]:
    """Every file and folder under ``directory``: its path, and the sha256 of a file's bytes."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(directory.rglob("*"))}


def test_cold_records_every_stage_and_leaves_the_users_cache_directory_as_it_was(tmp_path):
    """The user's cache, filled by a default run (caches kept), is byte for byte the same after
    `explain --cold`, which recorded every stage in a private directory and removed it. The runs
    are a user's: without the test suite's kernel-build setting."""
    users = tmp_path / "users-cache"
    private_parent = tmp_path / "tmp"  # where the private directory is made (TMPDIR): seen removed
    private_parent.mkdir()
    env = as_a_user_runs({"TORCHINDUCTOR_CACHE_DIR": str(users), "TRITON_CACHE_DIR": str(users / "triton"),
                          "TMPDIR": str(private_parent)})

    def explain(*options: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dynscope", "explain", "-q", *options, str(EXAMPLES / "warm_start.py")],
                              capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)

    default = explain("-o", str(tmp_path / "default.dynscope"))
    assert default.returncode == 0, default.stderr[-3000:]
    before = _tree(users)
    assert any(name.endswith(".py") for name in before)  # the default run used (and filled) the user's cache
    cold = explain("--cold", "-o", str(tmp_path / "cold.dynscope"))
    assert cold.returncode == 0, cold.stderr[-3000:]
    assert _tree(users) == before
    assert not [p for p in private_parent.iterdir() if p.name.startswith("dynscope-")]  # the private one is gone
    with Capture.open(str(tmp_path / "cold.dynscope")) as capture:
        assert not capture.run.keep_caches and capture.cache_lookups() == []
        stages = {s.key for s in capture.stages("0/0") if s.recorded}
        assert {"pre_grad", "post_grad", "output_code"} <= stages, stages
