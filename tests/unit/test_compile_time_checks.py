"""`dynscope check --max-compile-seconds / --max-compile-increase` and the per-call lookup change
`compare` reports, torch-free (recorded captures; hand-made overheads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynscope.analysis.call_overhead import CallOverhead, overhead_changes
from dynscope.commands import main
from dynscope.model.runtime import EntryTiming

CAPTURES = Path(__file__).resolve().parents[2] / "tests" / "data" / "captures" / "2.13.0+cpu"
RECOMPILES = str(CAPTURES / "recompiles_eager.dynscope")  # 0.57 s compiling
BREAKS = str(CAPTURES / "graph_breaks_eager.dynscope")  # 0.50 s compiling


def test_max_compile_seconds(capsys):
    assert main(["check", "--max-compile-seconds", "1", RECOMPILES]) == 0
    assert "0.57 s compiling (at most 1 s allowed): ok" in capsys.readouterr().out
    assert main(["check", "--max-compile-seconds", "0.5", RECOMPILES]) == 1
    assert "0.57 s compiling (at most 0.5 s allowed): FAIL" in capsys.readouterr().out


def test_max_compile_increase_against_the_baseline(capsys, tmp_path):
    junit = tmp_path / "j.xml"
    # the same run as its own baseline: no new problem, +0%
    assert main(["check", "--baseline", RECOMPILES, "--max-compile-increase", "0", RECOMPILES]) == 0
    assert "+0% against the baseline's 0.57 s (at most 0% more allowed): ok" in capsys.readouterr().out
    # 0.57 s against 0.50 s is +14%: over 10%, within 20%
    assert main(["check", "--baseline", BREAKS, "--max-compile-increase", "10%", "--junit", str(junit), RECOMPILES]) == 1
    out = capsys.readouterr().out
    assert "+14% against the baseline's 0.50 s (at most 10% more allowed): FAIL" in out
    assert "compile time at most 10% over the baseline" in junit.read_text()
    main(["check", "--baseline", BREAKS, "--max-compile-increase", "0.2", RECOMPILES])
    assert "(at most 20% more allowed): ok" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["check", "--max-compile-increase", "0.1", RECOMPILES],  # no baseline to compare with
    ["check", "--max-compile-seconds", "-1", RECOMPILES],
    ["check", "--max-compile-increase", "lots", "--baseline", BREAKS, RECOMPILES],
])
def test_bad_compile_time_limits_are_one_line_errors(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as stopped:  # argparse refuses a malformed value itself
        code = stopped.code
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith(("dynscope", "usage:", "dynscope check: error"))


def _overhead(name: str, file: str, lookup_s: float | None) -> CallOverhead:
    entry = EntryTiming(name, file, 10, "module", "cpu", 100, 0.1, 1, 0.5, 64, lookup_s, lookup_s)
    return CallOverhead(entry, lookup_s, 64, 0.001, ())


def test_overhead_changes_match_entries_by_name_and_file_name():
    before = [_overhead("Net.forward", "/ci/old/model.py", 5e-6), _overhead("step", "/ci/old/train.py", None)]
    after = [_overhead("Net.forward", "/home/me/model.py", 20e-6), _overhead("step", "/home/me/train.py", 3e-6),
             _overhead("other", "/home/me/model.py", 1e-6)]
    [change] = overhead_changes(before, after)
    assert (change.name, change.before_s, change.after_s) == ("Net.forward", 5e-6, 20e-6)
    assert change.change == pytest.approx(3.0)
