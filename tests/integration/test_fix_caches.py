"""dynscope fix's runs share their compile caches (real Inductor runs): the baseline fills a
private cache directory, a trial that leaves a graph unchanged loads it from there, one that
changes the graph misses; the user's own cache directory is never used, and the private one is
removed at the end."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
from conftest import as_a_user_runs

from dynscope.model import Capture

PROGRAM = '''import torch


def f(x):
    y = torch.sin(x) * 2
    print("between the graphs")  # a graph break: two graphs
    return torch.cos(y) + 1


print(torch.compile(f)(torch.ones(8)).sum().item())
'''

# Changes the second graph only (its constant): the first is the baseline's, unchanged.
PATCH = '''--- a/prog.py
+++ b/prog.py
@@ -6,3 +6,3 @@ def f(x):
     print("between the graphs")  # a graph break: two graphs
-    return torch.cos(y) + 1
+    return torch.cos(y) + 2
 
'''


def _lookups(path) -> dict[str, Counter]:
    """Per compiled function: its cache lookups' states (both layers)."""
    with Capture.open(str(path)) as capture:
        functions = {c.compile_id: c.function for c in capture.compiles()}
        found: dict[str, Counter] = {}
        for lookup in capture.cache_lookups():
            found.setdefault(functions.get(lookup.compile_id or "", "?"), Counter())[lookup.state] += 1
        return found


@pytest.mark.inductor
def test_a_trial_loads_the_graphs_it_left_unchanged_from_the_baselines_cache(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "change.diff").write_text(PATCH)
    users = tmp_path / "users-cache"
    private_parent = tmp_path / "tmp"
    private_parent.mkdir()
    env = as_a_user_runs({"TORCHINDUCTOR_CACHE_DIR": str(users), "TRITON_CACHE_DIR": str(users / "triton"),
                          "TMPDIR": str(private_parent)})
    result = subprocess.run([sys.executable, "-m", "dynscope", "fix", "--out", "out", "--jobs", "1", "-o", "fix.json",
                             "--patch", "change.diff", "prog.py"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    baseline = _lookups(tmp_path / "out" / "baseline.dynscope")
    assert set(baseline) == {"f", "torch_dynamo_resume_in_f_at_6"}, baseline
    assert all(set(states) == {"miss"} for states in baseline.values()), baseline  # a fresh directory: all miss
    trials = [p for p in (tmp_path / "out").glob("*.dynscope") if not p.name.startswith("baseline")]
    assert trials, sorted(p.name for p in (tmp_path / "out").iterdir())
    patched = _lookups(trials[0])
    assert set(patched["f"]) == {"hit"}, patched  # unchanged: loaded, not compiled again
    assert set(patched["torch_dynamo_resume_in_f_at_6"]) == {"miss"}, patched  # its graph changed: a miss
    assert not users.exists()  # the user's cache was never used
    assert not [p for p in private_parent.iterdir() if p.name.startswith("dynscope-")]  # the shared one is gone
