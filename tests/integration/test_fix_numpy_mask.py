"""dynscope fix on a program that draws a mask from np.random inside a compiled function, backend eager
(issue 40, item 5: eager is a witness). The compiled run draws from torch's stream, so it computes other
numbers than eager: fix says so first, a remedy whose run matches eager is not failed for differing from
the compiled baseline, and ``use_numpy_random_stream`` is offered for the break at the np.random line.
"""

from __future__ import annotations

import json
import shutil

from conftest import REPO, run_dynscope

from dynscope.analysis.fix_verdict import MATCHES_EAGER


def test_eager_is_a_witness_for_a_numpy_random_mask(tmp_path):
    shutil.copy(REPO / "tests" / "programs" / "fix_numpy_mask.py", tmp_path / "prog.py")
    result = run_dynscope("fix", "--jobs", "2", "--out", "out", "--json", "fix.json", "prog.py", cwd=tmp_path,
                          timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    doc = json.loads((tmp_path / "fix.json").read_text())
    eager = doc["baseline"]["eager_run"]
    assert eager["compiled_differs"] is True and eager["differs"], eager
    assert (tmp_path / "out" / "eager.dynscope").exists()
    # said first: before the first row of the table
    said = result.stdout + result.stderr
    assert "compiled ≠ eager:" in said and said.index("compiled ≠ eager:") < said.index("1. "), said[-3000:]
    rows = {t["remedy_key"]: t for t in doc["trials"]}
    stream = next(t for key, t in rows.items() if "use_numpy_random_stream" in key)
    assert stream["verdict"] != "failed" and stream["correct"] is True, stream
    assert stream["why"].endswith(MATCHES_EAGER), stream
    # the helper run whole outside Dynamo's tracing draws from NumPy itself: eager's numbers, not failed
    restored = [t for t in doc["trials"] if t["verdict"] in ("fixed", "improved") and MATCHES_EAGER in t["why"]]
    assert restored, [(t["remedy_key"], t["verdict"], t["why"]) for t in doc["trials"]]
    assert doc["combined"]["correct"] is True, doc["combined"]
