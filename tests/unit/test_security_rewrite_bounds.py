"""The rewrite step on a stranger's file is bounded (issue 39, defects N5 and N9; dynscope/rewrites/bounded.py).

Before: the catalogue ran in fix's own process on any file under 16 MiB, 135 s and 2.1 GB on a 2.5 MB
file with --budget unheard, and a valid file with a 600-branch ``elif`` chain overflowed libcst's
recursion (a 10,229-line traceback, exit 1). Now each attack is declined in one line and the rest of
fix goes on; the worker's peak RSS is measured (``RUSAGE_CHILDREN`` of a fresh process that makes the
rewrites) and stays under the stated cap. Times are asserted only against the bounds themselves.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from dynscope.rewrites import BreakSite
from dynscope.rewrites.bounded import (
    FILE_SECONDS,
    MAX_NESTING,
    MAX_SOURCE_BYTES,
    WORKER_MEMORY_BYTES,
    RewriteBudget,
    bounded_rewrites,
)
from dynscope.rewrites.catalogue import rewrites_for

BRANCH = BreakSite(2, "Data-dependent branching", "attempted to jump with TensorVariable()")
SMALL = textwrap.dedent("""\
    def f(x):
        if x.sum() > 0:
            return x + 1
        return x - 1
    """)
START_S = 15  # a fresh python's start and libcst's import, on a busy machine


def filler(size: int) -> str:
    """The attacker's file: a real break on line 2, then dense valid code up to ``size`` bytes."""
    parts, total, i = [SMALL], len(SMALL), 0
    while total < size:
        part = f"def g{i}(x):\n    y = x + {i}\n    return y * 2\n\n"
        parts.append(part)
        total += len(part)
        i += 1
    return "".join(parts)


def elif_chain(branches: int) -> str:
    """A valid file with one ``if`` and ``branches - 1`` ``elif``s: the attacker's 600-branch chain."""
    arms = "".join(f"    elif x == {i}:\n        return {i}\n" for i in range(1, branches))
    return f"def f(x):\n    if x.sum() > 0:\n        return 0\n{arms}    return -1\n"


_MEASURE = """
import json, resource, sys, time
from dynscope.rewrites import BreakSite, bounded
request = json.load(sys.stdin)
for name, value in request["limits"].items():
    setattr(bounded, name, value)
said = []
started = time.time()
found = bounded.bounded_rewrites(request["source"], BreakSite(**request["site"]), "attack.py",
                                 bounded.RewriteBudget(request["deadline"], said.append))
print(json.dumps({"rules": [r.rule for r in found], "said": said, "seconds": time.time() - started,
                  "worker_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
"""


def measured(source: str, site: BreakSite = BRANCH, deadline: float | None = None, **limits) -> dict:
    """bounded_rewrites in a fresh process (its worker the only child): rules found, lines said,
    seconds, and the worker's peak RSS in bytes."""
    request = {"source": source, "site": {"line": site.line, "gb_type": site.gb_type, "reason": site.reason,
                                          "function": site.function},
               "deadline": deadline, "limits": limits}
    done = subprocess.run([sys.executable, "-c", _MEASURE], input=json.dumps(request), capture_output=True,
                          text=True, timeout=FILE_SECONDS + 120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def one_decline(result: dict, *words: str) -> str:
    assert result["rules"] == []
    line, = result["said"]
    assert "\n" not in line and line.startswith("rewrites of attack.py (line 2): "), line
    assert line.endswith("; fix goes on without them"), line
    for word in words:
        assert word in line, (word, line)
    return line


def test_the_worker_finds_what_the_catalogue_finds():
    """The bounded path changes nothing for a real file: the same candidates, in the same order."""
    found = bounded_rewrites(SMALL, BRANCH, "m.py")
    assert found and found == rewrites_for(SMALL, BRANCH)


def test_a_2_5_mb_file_is_declined_in_one_line_without_a_worker():
    """N5: the attacker's 2.5 MB source file, read by no libcst at all."""
    result = measured(filler(2_500_000))
    one_decline(result, "2,500,0", f"{MAX_SOURCE_BYTES >> 20} MiB")
    assert result["worker_rss"] == 0  # no worker started


def test_a_600_branch_elif_chain_is_declined_in_one_line():
    """N9: libcst overflowed its recursion on it; the worker measures the depth with ast first."""
    result = measured(elif_chain(600))
    one_decline(result, "nested 605 levels deep", f"({MAX_NESTING})")
    assert result["seconds"] < START_S


@pytest.mark.parametrize("attack", ["a + b chain", "nested calls", "nested lists", "implicit string concatenation"])
def test_other_deep_expressions_are_declined_in_one_line_never_a_traceback(attack):
    source = {
        "a + b chain": SMALL + "y = " + " + ".join(["1"] * 2000) + "\n",
        "nested calls": SMALL + "y = " + "f(" * 190 + "1" + ")" * 190 + "\n",
        "nested lists": SMALL + "y = " + "[" * 190 + "]" * 190 + "\n",
        "implicit string concatenation": SMALL + "y = (" + " ".join(["'a'"] * 3000) + ")\n",
    }[attack]
    result = measured(source)
    # Before, each was a RecursionError out of libcst. The ast depth sees the + chain; libcst nests calls,
    # lists and implicit concatenation deeper than ast does, and its RecursionError is caught in the worker.
    one_decline(result, "nested 2002 levels deep" if attack == "a + b chain" else
                "reading the file's structure: the file is nested too deeply for libcst")


def test_a_step_over_its_time_is_skipped_and_said():
    """The timer in the worker: with a limit no real file meets, the shared structure is declined."""
    result = measured(filler(200_000), STRUCTURE_SECONDS=0.001)
    one_decline(result, "took more than 0.001 s")


def test_the_whole_file_is_stopped_at_its_time():
    started = time.time()
    result = measured(filler(900_000), FILE_SECONDS=2.0)  # under the size limit: libcst alone takes longer
    one_decline(result, "took more than 2 s: stopped")
    assert time.time() - started < 2.0 + START_S


def test_the_worker_runs_under_its_memory_cap():
    """A file of dense code: the worker's peak RSS stays under its cap; and
    the largest file the step reads under a lower cap is stopped in one line instead of filling the machine."""
    result = measured(filler(100_000), FILE_SECONDS=600.0)
    assert 0 < result["worker_rss"] < WORKER_MEMORY_BYTES, result
    capped = measured(filler(MAX_SOURCE_BYTES - 1000), FILE_SECONDS=600.0, WORKER_MEMORY_BYTES=300 << 20)
    one_decline(capped)
    assert capped["worker_rss"] < 300 << 20, capped


def test_no_time_left_in_the_budget_starts_no_worker():
    result = measured(SMALL, deadline=time.time() - 1)
    one_decline(result, "no time left in --budget")
    assert result["worker_rss"] == 0


def test_no_time_left_is_said_once_for_every_file_after_it():
    said: list[str] = []
    budget = RewriteBudget(time.time() - 1, said.append)
    for i in range(100):  # a program with a hundred breaks in a hundred files
        assert bounded_rewrites(SMALL, BRANCH, f"m{i}.py", budget) == []
    assert said == ["rewrites of m0.py (line 2): no time left in --budget (nor for any file after it); "
                    "fix goes on without them"]


def test_the_budget_stops_a_worker_under_way():
    started = time.time()
    result = measured(filler(900_000), deadline=time.time() + 3, FILE_SECONDS=600.0)
    one_decline(result, "(the rest of --budget): stopped")
    assert time.time() - started < 3 + START_S


def test_each_file_and_break_is_asked_once():
    said: list[str] = []
    budget = RewriteBudget(None, said.append)
    deep = elif_chain(600)
    for _ in range(3):  # fix asks again on every partial read of the baseline
        assert bounded_rewrites(deep, BreakSite(2, "", ""), "deep.py", budget) == []
    assert len(said) == 1 and len(budget.known) == 1
    assert bounded_rewrites(deep, BreakSite(2, "", ""), "a\nb\x1b[2J.py", budget) == []
    assert said[-1].startswith("rewrites of 'a\\nb\\x1b[2J.py' (line 2): nested")  # a stranger's file name: one line


def test_the_worker_imports_nothing_from_the_working_directory(tmp_path, monkeypatch):
    """It runs as python -I from /, with dynscope's own install first: a json.py planted where fix runs is not read."""
    marker = tmp_path / "MARKER"
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (tmp_path / "libcst.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert bounded_rewrites(SMALL, BRANCH, "m.py")
    assert not marker.exists()


def test_each_rule_over_its_time_is_skipped_and_the_others_go_on():
    result = measured(filler(20_000), RULE_SECONDS=0.0001, STRUCTURE_SECONDS=60.0)
    assert result["said"], result
    for line in result["said"]:
        assert line.startswith("rewrites of attack.py (line 2): rule ") and "\n" not in line, line
        assert "took more than 0.0001 s: skipped; fix goes on without them" in line, line


def test_a_coding_line_python_reads_otherwise_is_declined():
    """``# coding: utf-7`` makes Python run other text than the UTF-8 the rules read (``+AAo-`` is a line end
    to it): the rewrite would change code nobody sees. A BOM or an ASCII file declared latin-1 reads the same."""
    said: list[str] = []
    budget = RewriteBudget(None, said.append)
    site = BreakSite(3, BRANCH.gb_type, BRANCH.reason)
    assert bounded_rewrites("# coding: utf-7\n" + SMALL, site, "seven.py", budget) == []
    assert bounded_rewrites("# coding: no-such-codec\n" + SMALL, site, "none.py", budget) == []
    assert [line.split(": ", 1)[1] for line in said] == [
        "it declares the encoding utf-7, in which Python reads other text than the UTF-8 the rules read; "
        "fix goes on without them",
        "its coding line names no encoding Python knows; fix goes on without them"]
    assert bounded_rewrites("# -*- coding: latin-1 -*-\n" + SMALL, site, "latin.py", budget)
    assert bounded_rewrites("\ufeff" + SMALL, BRANCH, "bom.py", budget) == rewrites_for("\ufeff" + SMALL, BRANCH) != []
    assert len(said) == 2


def test_huge_literals_are_text_like_any_other():
    big = SMALL + "S = '" + "a" * 900_000 + "'\nT = '''" + "x\n" * 50_000 + "'''\n"
    assert [r.rule for r in bounded_rewrites(big, BRANCH, "m.py")] == ["tensor-where"]
