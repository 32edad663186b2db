"""A real ``dynscope fix`` whose breaks sit in the attacker's files (issue 39, N5 and N9), backend eager.

The breaks are in a 2.5 MB helper file (before: the rewrite step took 135 s and 2.1 GB in fix's own
process, --budget unheard) and in a valid file with a 600-branch ``elif`` chain (before: libcst's
recursion overflowed, a 10,229-line traceback, exit 1). Now each is declined in one line, the
settings are tried as always, and fix ends within its --budget with exit 0; the peak RSS of fix
and every process under it is measured (RUSAGE_CHILDREN of a small launcher).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import python_file_hashes

PROGRAMS = Path(__file__).parent.parent / "programs"
BUDGET_S = 300
RSS_BOUND = 1536 << 20  # fix itself stays near 150 MB; each run of the program imports torch (about 600 MB)

PROGRAM = """\
import torch
from big import helper
from deep import pick


@torch.compile(backend="eager")
def f(x):
    return pick(helper(x * 2)) + 1


print(f(torch.ones(3)).sum().item())
"""

DEEP = "".join(["def pick(x):\n    if x.sum() > 0:\n        return x + 1\n",
                *(f"    elif x.sum() == {i}:\n        return x + {i}\n" for i in range(1, 600)),
                "    return x\n"])

_LAUNCHER = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=open(sys.argv[1], "w"))
sys.exit(code)
"""


def big_helper(size: int) -> str:
    lines = ["def helper(x):\n    if x.sum() > 0:\n        return x + 1\n    return x - 1\n\n\n"]
    i, total = 0, len(lines[0])
    while total < size:
        lines.append(f"def unused_{i}(x):\n    y = x + {i}\n    return y * 2\n\n\n")
        total += len(lines[-1])
        i += 1
    return "".join(lines)


def test_the_attacker_s_files_are_declined_in_one_line_and_fix_goes_on(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "big.py").write_text(big_helper(2_500_000))
    (tmp_path / "deep.py").write_text(DEEP)
    before = python_file_hashes(tmp_path)
    started = time.time()
    done = subprocess.run([sys.executable, "-c", _LAUNCHER, str(tmp_path / "rss"), sys.executable, "-m", "dynscope",
                           "fix", "--out", "out", "-o", "fix.json", "--budget", str(BUDGET_S), "--only", "break",
                           "prog.py"], cwd=tmp_path, capture_output=True, text=True, timeout=BUDGET_S + 120)
    took = time.time() - started
    rss = int((tmp_path / "rss").read_text())
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "Traceback" not in output and "RecursionError" not in output
    big, = [line for line in output.splitlines() if "rewrites of big.py" in line]
    assert "bytes is more than the rewrite step reads (1 MiB); fix goes on without them" in big
    deep, = [line for line in output.splitlines() if "rewrites of deep.py" in line]
    assert re.search(r"nested 6\d\d levels deep, more than the rewrite step takes \(200\); fix goes on without them", deep)
    doc = json.loads((tmp_path / "fix.json").read_text())
    files = {t["problem"]["file"].rsplit("/", 1)[-1] for t in doc["trials"]}
    assert {"big.py", "deep.py"} <= files  # both breaks were worked on, with what is not a rewrite
    assert not any("rewrite" in t for t in doc["trials"])
    print(f"fix: {took:.1f} s, peak RSS of fix and its runs {rss / 2**20:.0f} MiB")
    assert took < BUDGET_S + 60, took
    assert rss < RSS_BOUND, rss  # fix and its rewrite workers (the runs come from the test session's fork pool when it has one)
    assert python_file_hashes(tmp_path) == before


def test_mcp_judge_patch_ends_within_its_own_budget(tmp_path):
    """judge_patch on a program that hangs: before, the answer waited up to --run-timeout (an hour)."""
    from dynscope.agents.served import ServedDirectory
    from dynscope.agents.tools import JUDGE_GRACE_S, Tools
    from dynscope.errors import DynscopeError

    shutil.copy(PROGRAMS / "fix_hangs.py", tmp_path / "prog.py")
    patch = "--- a/prog.py\n+++ b/prog.py\n@@ -12,2 +12,2 @@\n def f(x):\n-    y = torch.sin(x)\n+    y = torch.cos(x)\n"
    tools = Tools(ServedDirectory.at(str(tmp_path)), allow_run=True)
    budget = 5
    started = time.time()
    # what is left of budget_s after reading the patch: 4.9 s or so
    with pytest.raises(DynscopeError, match=r"did not finish within --budget [45](\.\d)? s"):
        tools.judge_patch("prog.py", patch, args=["--hang-in-baseline"], budget_s=budget)
    assert time.time() - started < budget + JUDGE_GRACE_S
