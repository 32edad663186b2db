"""The compile caches on real Inductor runs of examples/warm_start.py (each compile costs seconds
on a CPU: two runs here, both needed). The parsing, key diff, compare and check logic is tested
without torch in tests/unit/test_caches.py, on captures recorded the same way."""

from __future__ import annotations

import json

from conftest import EXAMPLES, run_dynscope

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
    assert f"{SETTING}: False → True" in result.stderr
    caches = _summary(tmp_path / "run.dynscope")["caches"]
    assert caches["changed_components"] == [SETTING]
    explained = [x for x in caches["lookups"] if x["changes"]]
    assert {x["layer"] for x in explained} == {"aotautograd", "fx_graph"}
    assert all(x["changes"] == [{"component": SETTING, "before": "False", "after": "True"}] for x in explained)
