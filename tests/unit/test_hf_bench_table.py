"""bench/hf_rewrites.py's table (the bench itself runs real models for minutes: not in the suite): its rows and
totals from a recorded run, and which run a row's "after" columns come from."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "tests" / "data" / "hf_bench" / "results.json"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hf_rewrites", REPO / "bench" / "hf_rewrites.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _summary(breaks: list[tuple[str, int, int]], steady_s: float, calls: int) -> dict[str, Any]:
    return {"totals": {"graph_breaks": sum(c for _, _, c in breaks), "distinct_graph_breaks": len(breaks)},
            "graph_breaks": [{"file": f"/venv/lib/python3.11/site-packages/{f}", "line": line, "gb_type": "Data dependent operator",
                              "headline": "Data dependent operator", "count": c} for f, line, c in breaks],
            "runtime": {"profiled": True, "entries": [{"calls": calls, "compiling_calls": 1, "steady_s": steady_s}]}}


def _fix(verdict: str, correct: bool | None) -> dict[str, Any]:
    rewrite = {"rule": "numpy-int-math", "cause": "", "file": "transformers/m.py", "package": "transformers", "version": "5"}
    return {"wall_s": 90.0, "runs": 4,
            "trials": [{"remedy": "np.lcm -> math.lcm", "verdict": "fixed", "rewrite": rewrite},
                       {"remedy": "capture_scalar_outputs = True", "verdict": "worse"}],
            "combined": {"remedies": ["np.lcm -> math.lcm", "capture_scalar_outputs = True"], "verdict": verdict,
                         "correct": correct, "capture": "c.dynscope"}}


def test_a_verified_combined_run_gives_the_after_columns(bench: ModuleType) -> None:
    before = _summary([("transformers/m.py", 169, 3), ("transformers/m.py", 271, 2)], steady_s=0.5, calls=6)
    after = _summary([("transformers/m.py", 271, 2)], steady_s=0.25, calls=6)
    row = bench.result_of("reformer", _fix("improved", True), before, after, plain_s=30.0)
    assert (row.breaks_before, row.breaks_after, row.distinct_before, row.distinct_after) == (5, 2, 2, 1)
    assert row.steady_before_s == pytest.approx(0.1) and row.steady_after_s == pytest.approx(0.05)
    assert row.rules == ("numpy-int-math",) and row.status == "verified (improved)"
    assert row.settings == ("capture_scalar_outputs = True",)  # a setting is not counted as a rewrite
    assert [(s.file, s.line, s.count) for s in row.left] == [("transformers/m.py", 271, 2)]
    assert row.fix_goal_s == pytest.approx((1 + 3 / 2) * 30.0)


def test_an_unverified_combined_run_leaves_after_equal_to_before(bench: ModuleType) -> None:
    before = _summary([("transformers/m.py", 169, 3)], steady_s=0.5, calls=6)
    after = _summary([], steady_s=0.1, calls=6)  # fewer breaks, but the outputs differ: no win to count
    row = bench.result_of("reformer", _fix("failed", False), before, after, plain_s=None)
    assert (row.breaks_after, row.distinct_after, row.steady_after_s) == (3, 1, row.steady_before_s)
    assert row.status == "combined failed, outputs differ" and row.outputs_equal is False and row.fix_goal_s is None


def test_the_recorded_table_adds_up(bench: ModuleType) -> None:
    results = bench.load_results(RECORDED)
    table = bench.format_table(results)
    rows = {line.split()[0]: line for line in table.splitlines()[2:2 + len(results)]}
    assert sorted(rows) == sorted(r.model for r in results)
    for r in results:
        assert f"{r.breaks_before}→{r.breaks_after}" in rows[r.model].split()[1]
    before = sum(r.breaks_before for r in results)
    after = sum(r.breaks_after for r in results)
    total = next(line for line in table.splitlines() if line.startswith("total"))
    match = re.search(r"occurrences removed: (\d+) of (\d+) \((\d+)%\)", total)
    assert match is not None
    assert (int(match[1]), int(match[2]), int(match[3])) == (before - after, before, round(100 * (before - after) / before))
    for r in results:
        for site in r.left:
            assert f"{site.file}:{site.line}" in table


def test_the_source_part_of_a_combined_patch_leaves_its_settings_out(bench: ModuleType) -> None:
    diff = ("--- a/transformers/m.py\n+++ b/transformers/m.py\n@@ -1 +1 @@\n-x = np.lcm(a, b)\n+x = math.lcm(a, b)\n")
    patch = "import torch\ntorch._dynamo.config.capture_scalar_outputs = True\n# pass dynamic=True where ...:\n" + diff
    assert bench.source_part(patch) == diff
    assert bench.source_part("import torch\ntorch._dynamo.config.capture_scalar_outputs = True\n") == ""


def _judge(verdict: str, correct: bool | None) -> dict[str, Any]:
    return {"trials": [{"remedy": "the patch m.diff", "verdict": verdict, "correct": correct, "capture": "t.dynscope",
                        "after": {"graph_breaks": 0}}]}


@pytest.mark.parametrize(("verdict", "correct", "counted"), [
    ("fixed", True, True), ("improved", True, True), ("trade-off", True, False), ("fixed", False, False),
])
def test_rewrites_only_counts_a_win_with_equal_outputs(bench: ModuleType, verdict: str, correct: bool, counted: bool) -> None:
    before = _summary([("transformers/m.py", 169, 3), ("transformers/m.py", 271, 2)], steady_s=0.5, calls=6)
    after = _summary([("transformers/m.py", 271, 2)], steady_s=0.25, calls=6)
    strict = bench.strict_of(_judge(verdict, correct), before, after)
    assert strict.counted is counted and strict.status == verdict
    assert (strict.breaks_before, strict.breaks_after) == (5, 2)  # measured either way, shown as measured
    assert strict.final_breaks == (2 if counted else 5)
    # a trade-off or changed outputs leaves its sites where they were
    assert [s.line for s in strict.left] == ([271] if counted else [169, 271])


def test_the_rewrites_only_total_counts_judged_wins_against_every_models_baseline(bench: ModuleType) -> None:
    base = bench.load_results(RECORDED)[0]
    won = bench.Strict("fixed", 10, 0, 2, 0, True, 0.2, 0.1)
    traded = bench.Strict("trade-off", 8, 2, 2, 1, True, 0.2, 0.6)
    rows = [replace(base, model="a", breaks_before=10, strict=won, by_rules=10, by_ports=0, by_settings=0),
            replace(base, model="b", breaks_before=8, strict=traded),
            replace(base, model="c", breaks_before=12, strict=None)]
    lines = bench.format_strict([r for r in rows if r.strict is not None], total_before=30)
    assert lines[-2] == "removed by verified rewrites alone: 10 of 30 (33.3%); slower steady state on 0 of 1 counted"
    assert lines[-1].startswith("  of which by general rules 10 (33.3%), by library ports 0 (0.0%)")
    assert "not split" not in lines[-1]  # b's trade-off removed nothing; c was not judged
    # a row recorded before the split is counted in neither, and named
    old = bench.format_strict([replace(rows[0], by_rules=None, by_ports=None, by_settings=None)], total_before=30)
    assert "general rules 0 (0.0%), by library ports 0 (0.0%)" in old[-1] and "recorded before the split): a" in old[-1]
    assert any(line.startswith("b ") and "trade-off (not counted)" in line for line in lines)
    assert bench.no_rewrite(rows[2]).final_breaks == 12 and not bench.no_rewrite(rows[2]).counted


def test_a_row_with_its_rewrites_only_judge_survives_the_json(bench: ModuleType, tmp_path: Path) -> None:
    base = bench.load_results(RECORDED)[0]
    site = bench.Site("transformers/m.py", 3, "x", 1)
    row = replace(base, strict=bench.Strict("improved", 4, 1, 2, 1, True, 0.2, 0.1, (site,)))
    bench.save_results(tmp_path / "r.json", [row], {})
    assert bench.load_results(tmp_path / "r.json") == [row]


def test_several_judge_runs_count_by_their_majority(bench: ModuleType) -> None:
    def run(verdict: str, after_s: float) -> Any:
        return bench.Strict(verdict, 22, 9, 2, 1, True, 0.1, after_s)

    # 2 of 3 won: counted, shown by the winners' median-ratio run, every run listed
    row = bench.majority([run("trade-off", 0.3), run("improved", 0.05), run("improved", 0.08)])
    assert row.counted and row.steady_after_s == 0.05 and row.verdicts == ("trade-off", "improved", "improved")
    assert row.ratios == pytest.approx((3.0, 0.5, 0.8))
    # 1 of 3, or a tie: not counted
    assert not bench.majority([run("trade-off", 0.3), run("improved", 0.05), run("trade-off", 0.2)]).counted
    assert not bench.majority([run("trade-off", 0.3), run("improved", 0.05)]).counted
    assert bench.majority([run("improved", 0.05)]).verdicts == ()  # one run: as it is
    lines = bench.format_strict([replace(bench.load_results(RECORDED)[0], model="enc", breaks_before=22, strict=row)], 22)
    assert "runs: trade-off 3.00, improved 0.50, improved 0.80" in lines[2] and lines[-2].startswith(
        "removed by verified rewrites alone: 13 of 22 (59.1%)")


def _row(remedy: str, verdict: str, rule: str | None, problems: list[tuple[int, int]], before: int,
         after: int | None) -> dict[str, Any]:
    """A fix trial row serving break problems (line, count)."""
    row: dict[str, Any] = {
        "remedy": remedy, "verdict": verdict, "correct": True, "before": {"count": before},
        "after": None if after is None else {"count": after},
        "problems": [{"kind": "break", "file": "/t/m.py", "line": line, "detail": "d", "count": c} for line, c in problems]}
    if rule is not None:
        row["rewrite"] = {"rule": rule}
    return row


def test_removed_occurrences_are_counted_apart_by_rules_ports_and_settings(bench: ModuleType) -> None:
    """Issue 40 item 6: library ports stay, but count apart."""
    fix = {"wall_s": 90.0, "runs": 6,
           "combined": {"remedies": ["port", "rule", "setting", "lost"], "verdict": "fixed", "correct": True},
           "trials": [_row("port", "fixed", "library-port", [(10, 14)], 14, 0),
                      _row("rule", "improved", "assert-to-check", [(20, 5), (21, 3)], 8, 2),  # 6 of 8 gone
                      _row("setting", "fixed", None, [(10, 14), (30, 2)], 16, 0),  # line 10 counted once, for the port
                      _row("lost", "trade-off", "guard-logging", [(40, 9)], 9, 0),  # not a win: not counted
                      _row("not-chosen", "fixed", "assert-to-check", [(50, 4)], 4, 0)]}  # not in the combined change
    assert bench.attribute(fix) == {"rules": 6, "ports": 14, "settings": 2}
    before = _summary([("transformers/m.py", 10, 14), ("transformers/m.py", 20, 5), ("transformers/m.py", 21, 3),
                       ("transformers/m.py", 30, 2)], steady_s=0.5, calls=6)
    after = _summary([("transformers/m.py", 20, 2)], steady_s=0.5, calls=6)
    row = bench.result_of("bigbird", fix, before, after, plain_s=None)
    assert (row.by_rules, row.by_ports, row.by_settings, row.ports) == (6, 14, 2, ("port",))
    # new breaks elsewhere: 24 → 8 removed 16 in all; the ports' part first, then the rules', then the settings'
    grown = _summary([("transformers/m.py", 20, 2), ("transformers/m.py", 99, 6)], steady_s=0.5, calls=6)
    row_grown = bench.result_of("bigbird", fix, before, grown, plain_s=None)
    assert (row_grown.by_ports, row_grown.by_rules, row_grown.by_settings) == (14, 2, 0)
    # the rewrites alone removed 18: at most the ports' 14 to the ports, the rest to the general rules
    judged = replace(row, strict=bench.Strict("fixed", 19, 1, 2, 1, True, 0.2, 0.1))
    assert bench.split_strict(judged) == (4, 14)
    table = bench.format_table([judged])
    assert "rules 6 · ports 14 · settings 2" in table and "+ 1 library port" in table
    assert "general rules 6 (25.0%), library ports 14 (58.3%), settings and wrappers 2 (8.3%)" in table
