"""`--json [PATH]` and `--md [PATH]` the same in every command (stdout without a path, a file with
one, never over a capture), a capture or script right after the flag taken as the input, and fix's
old `-o PATH` kept working with a one-line notice. Torch-free: recorded captures, no program run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dynscope.commands import main

CAPTURES = Path(__file__).resolve().parents[2] / "tests" / "data" / "captures" / "2.13.0+cpu"
BREAKS = str(CAPTURES / "graph_breaks_eager.dynscope")
TRAIN = str(CAPTURES / "train_loop_aot_eager.dynscope")


def _code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stopped:  # argparse's own refusals
        return int(stopped.code or 0)


@pytest.mark.parametrize("argv, schema", [
    (["summary", BREAKS, "--json"], "dynscope.summary/1"),
    (["summary", "--json", BREAKS], "dynscope.summary/1"),  # the capture, not the JSON's path
    (["summary", "--json", BREAKS, TRAIN], "dynscope.summary-set/1"),
    (["compare", TRAIN, BREAKS, "--json"], "dynscope.compare/1"),
    (["compare", "--json", TRAIN, BREAKS], "dynscope.compare/1"),
])
def test_json_without_a_path_goes_to_stdout(argv, schema, capsys):
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == schema


def test_json_and_md_with_a_path_write_files(tmp_path, capsys):
    out_json, out_md = tmp_path / "s.json", tmp_path / "s.md"
    assert main(["summary", BREAKS, "--json", str(out_json), "--md", str(out_md)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and f"wrote {out_json}" in captured.err
    assert json.loads(out_json.read_text())["schema"] == "dynscope.summary/1"
    assert out_md.read_text().startswith("## torch.compile report (dynscope)")
    cmp_json, cmp_md = tmp_path / "c.json", tmp_path / "c.md"
    assert main(["compare", TRAIN, BREAKS, "--json", str(cmp_json), "--md", str(cmp_md)]) == 0
    assert json.loads(cmp_json.read_text())["schema"] == "dynscope.compare/1"
    assert cmp_md.read_text().startswith("## torch.compile:")


def test_md_without_a_path_goes_to_stdout(capsys):
    assert main(["summary", BREAKS, "--md"]) == 0
    assert capsys.readouterr().out.startswith("## torch.compile report (dynscope)")
    assert main(["compare", TRAIN, BREAKS, "--md"]) == 0
    assert capsys.readouterr().out.startswith("## torch.compile:")


def test_a_document_never_replaces_a_capture(tmp_path, capsys):
    other = tmp_path / "other.capture"  # a capture by its header, whatever its name: an input
    shutil.copy(TRAIN, other)
    before = other.read_bytes()
    assert main(["summary", "--json", str(other)]) == 0
    assert json.loads(capsys.readouterr().out)["capture"] == str(other) and other.read_bytes() == before
    assert main(["summary", BREAKS, "--json", str(other)]) == 0  # both summarized, as the ranks of one run
    assert json.loads(capsys.readouterr().out)["schema"] == "dynscope.summary-set/1" and other.read_bytes() == before
    wal = tmp_path / "x.json"
    assert _code(["summary", str(other), "--json", str(other) + "-wal"]) == 2  # part of a capture it reads
    assert "refusing to write" in capsys.readouterr().err and not wal.exists()


@pytest.mark.parametrize("argv", [["fix", "--json", "train.py"], ["fix", "--md", "train.py"],
                                  ["numerics", "--json", "train.py"]])
def test_a_script_after_the_flag_is_one_line_on_where_the_path_goes(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _code(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "took train.py for the document's path" in err[0] and "--json - train.py" in err[0]


def test_fix_o_is_the_old_spelling_of_json_with_a_notice(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _code(["fix", "-o", "fix.json", "missing.py"]) == 2  # parsed as --json fix.json, then: no such script
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "dynscope: fix -o PATH is now fix --json PATH; fix -o PATH keeps working until the next release"
    assert "missing.py" in err[1] and len(err) == 2
    assert _code(["fix", "--json", "fix.json", "missing.py"]) == 2
    assert "is now" not in capsys.readouterr().err


def test_report_takes_json_and_md_as_the_others_do(tmp_path, capsys):
    assert main(["report", BREAKS, "--md"]) == 0
    assert capsys.readouterr().out.startswith("## torch.compile report (dynscope)")
    assert main(["report", "--json", BREAKS]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "dynscope.report/1"
    out = tmp_path / "r.md"
    assert main(["report", BREAKS, "--md", str(out)]) == 0
    assert out.read_text().startswith("## torch.compile report (dynscope)")
    assert _code(["report", BREAKS, "--md", "-o", str(out)]) == 2  # one way to say where it goes
    assert "names the format and the file itself" in capsys.readouterr().err
