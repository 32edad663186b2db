"""dynscope fix's combined guess (tests/programs/fix_guess.py): started beside the trials on the bet
that every remedy wins, stopped as soon as one of its remedies loses, and still counted as --jobs 1
runs it in full. A remedy judged "moved to eager" never enters the combined change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import REPO, python_file_hashes, run_dynscope

SLEEP_S = 120  # the guess, and only the guess, sleeps this long after its work: a fix that waited for it takes longer


def test_the_guess_stops_when_one_of_its_remedies_loses(tmp_path: Path) -> None:
    shutil.copy(REPO / "tests" / "programs" / "fix_guess.py", tmp_path / "prog.py")
    before = python_file_hashes(tmp_path)
    result = run_dynscope("fix", "--jobs", "2", "--out", "out", "-o", "fix.json", "prog.py", str(SLEEP_S),
                          cwd=tmp_path, timeout=SLEEP_S * 3)
    assert result.returncode == 0, result.stderr[-4000:]
    doc = json.loads((tmp_path / "fix.json").read_text())
    assert "combined guess: 2 remedies (stopped: run the NumPy helper block_rand_mask() in eager" in result.stderr, \
        result.stderr[-3000:]
    assert doc["wall_s"] < SLEEP_S
    verdicts = {t["remedy_key"].split(":")[1]: t["verdict"] for t in doc["trials"]}
    assert verdicts["keep-tensor"] == "fixed" and verdicts["disable-numpy-helper"] == "moved to eager"
    # the baseline, one run per remedy, and the guess: counted though stopped, as --jobs 1 runs it in full
    assert doc["runs"] == 1 + len(doc["trials"]) + 1
    combined = doc["combined"]
    assert not any("NumPy helper" in r or "block_rand_mask" in r for r in combined["remedies"]), combined["remedies"]
    assert combined["verdict"] == "fixed" and combined["correct"] is True
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert not any(n.startswith("combined") for n in names), names  # the stopped guess left nothing behind
    assert python_file_hashes(tmp_path) == before
