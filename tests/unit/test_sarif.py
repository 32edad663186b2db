"""check --format sarif on recorded captures (no torch): a valid SARIF 2.1.0 log, validated against
OASIS's schema (tests/data/sarif-2.1.0.json), with one result per new problem at its source line."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from dynscope.analysis.baseline import Finding
from dynscope.commands import main
from dynscope.reporters.sarif import SarifFinding, SarifNotice, sarif_document, sarif_text

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "data" / "captures"
SCHEMA = json.loads((ROOT / "tests" / "data" / "sarif-2.1.0.json").read_text())
VERSIONS = sorted(p.name for p in CAPTURES.iterdir() if p.is_dir() and any(p.glob("*.dynscope")))


def validate(document: object) -> None:
    jsonschema.Draft4Validator(SCHEMA).validate(document)


def line_of(example: str, fragment: str) -> int:
    lines = (ROOT / "examples" / example).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if fragment in line)


def check_sarif(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["check", *argv, "--format", "sarif"])
    out = capsys.readouterr().out
    return code, json.loads(out)  # stdout is the SARIF log alone


def test_the_schema_rejects_what_is_not_sarif():
    # The validator must be able to fail: a result without a message is not SARIF.
    bad = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"ruleId": "a"}]}]}
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)


@pytest.mark.parametrize("version", VERSIONS)
def test_new_breaks_are_sarif_results_at_their_lines(version, capsys):
    folder = CAPTURES / version
    code, log = check_sarif(capsys, str(folder / "graph_breaks_eager.dynscope"),
                            "--baseline", str(folder / "recompiles_eager.dynscope"), "--max-recompiles", "0")
    validate(log)
    assert code == 1
    run = log["runs"][0]
    results = run["results"]
    expected_lines = {line_of("graph_breaks.py", f) for f in ("print(", "if y.mean()", ".item()", "graph_break()")}
    assert {r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in results} == expected_lines
    for r in results:
        artifact = r["locations"][0]["physicalLocation"]["artifactLocation"]
        assert artifact == {"uri": "examples/graph_breaks.py", "uriBaseId": "%SRCROOT%"}
        assert r["message"]["text"].startswith("new graph break")
        rule = run["tool"]["driver"]["rules"][r["ruleIndex"]]
        assert rule["id"] == r["ruleId"]
        assert rule["help"]["text"]
    ids = {r["ruleId"] for r in results}
    if all(r["ruleId"].startswith("GB") for r in results):  # a torch with graph-break ids
        assert {"GB0059", "GB0170", "GB0124", "GB0025"} <= ids
        print_rule = next(rule for rule in run["tool"]["driver"]["rules"] if rule["id"] == "GB0059")
        assert print_rule["helpUri"].endswith("gb0059.html")
        assert "reorderable_logging_functions" in print_rule["help"]["text"]
    else:  # torch 2.6 gives breaks no id: one stable dynscope rule
        assert ids == {"dynscope-graph-break"}
    # The limit is a notification of the run (it has no source line), passed here: 0 recompiles;
    # the two captures ran different scripts, which is a warning (issue 41), not a failure.
    warning, notice = run["invocations"][0]["toolExecutionNotifications"]
    assert notice["level"] == "note" and "0 recompiles" in notice["message"]["text"]
    assert warning["level"] == "warning" and "the entry scripts differ" in warning["message"]["text"]


def test_recompiles_and_allowed_findings(capsys, tmp_path):
    folder = CAPTURES / VERSIONS[-1]
    allow = tmp_path / "allow.toml"
    allow.write_text('[[allow]]\nwhere = "examples/recompiles.py:20"\nreason = "mode switches on purpose"\n')
    code, log = check_sarif(capsys, str(folder / "recompiles_eager.dynscope"),
                            "--baseline", str(folder / "graph_breaks_eager.dynscope"), "--allow", str(allow))
    validate(log)
    assert code == 1  # the recompiles at line 11 are not allowed
    results = log["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"dynscope-recompile"}
    suppressed = [r for r in results if "suppressions" in r]
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in suppressed] == [20]
    assert suppressed[0]["suppressions"][0]["justification"] == "mode switches on purpose"
    assert len(results) - len(suppressed) == 3


def test_no_new_problem_is_an_empty_valid_log(capsys):
    capture = str(CAPTURES / VERSIONS[-1] / "graph_breaks_eager.dynscope")
    code, log = check_sarif(capsys, capture, "--baseline", capture)
    validate(log)
    assert code == 0 and log["runs"][0]["results"] == []


def test_locations_and_hostile_text():
    hostile = "\x1b]8;;http://evil\x07x\u202e\x00"
    findings = [
        SarifFinding(Finding("error", "/abs/dir with space/m.py", 3, "new compile error in f", hostile), "c.dynscope"),
        SarifFinding(Finding("recompile", "<frozen runpy>", 9, "new recompile of g", "guard failed: x"), "c"),
        SarifFinding(Finding("graph_break", "a.py", None, "new graph break [GB1]", "m", "GB1",
                             hints=(hostile,), doc_link="http://evil.example/x"), "c"),
    ]
    document = sarif_document(findings, [SarifNotice("c: 9 graph breaks (at most 1 allowed)", True)])
    validate(document)
    results = document["runs"][0]["results"]
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "file:///abs/dir%20with%20space/m.py"}
    assert "locations" not in results[1]  # no file on disk: no location rather than an invalid URI
    assert "region" not in results[2]["locations"][0]["physicalLocation"]
    rule = document["runs"][0]["tool"]["driver"]["rules"][2]
    assert "helpUri" not in rule  # only torch's documentation sites become links
    text = sarif_text(findings, [])
    assert text.isascii() and all(ch >= " " or ch == "\n" for ch in text)
    assert "\\\\x1b" in text  # shown as a visible escape, inside JSON


@pytest.mark.parametrize("version", VERSIONS)
def test_a_limit_gives_one_result_per_break_at_its_line(version, capsys):
    """`check --max-graph-breaks 0 --format sarif` (issue 41): the limit fails the run and each break
    it counted is a result at its line, valid SARIF."""
    code, log = check_sarif(capsys, str(CAPTURES / version / "graph_breaks_eager.dynscope"), "--max-graph-breaks", "0")
    validate(log)
    assert code == 1
    run = log["runs"][0]
    results = run["results"]
    expected_lines = {line_of("graph_breaks.py", f) for f in ("print(", "if y.mean()", ".item()", "graph_break()")}
    assert len(results) == 4
    assert {r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in results} == expected_lines
    assert {r["properties"]["check"] for r in results} == {"max-graph-breaks"}
    assert all(r["level"] == "error" and r["message"]["text"].startswith("graph break") for r in results)
    [notice] = run["invocations"][0]["toolExecutionNotifications"]
    assert notice["level"] == "error" and "4 graph breaks (at most 0 allowed)" in notice["message"]["text"]


def test_every_failing_limit_gives_its_results_in_every_format(capsys, tmp_path):
    """Recompiles over --max-recompiles: one SARIF result, one GitHub annotation and one JUnit line each;
    a limit that holds gives none."""
    capture = str(CAPTURES / VERSIONS[-1] / "recompiles_eager.dynscope")
    code, log = check_sarif(capsys, capture, "--max-recompiles", "1", "--max-graph-breaks", "100")
    validate(log)
    results = log["runs"][0]["results"]
    assert code == 1 and len(results) == 4  # the four recompiles, none for the breaks within their limit
    assert {r["ruleId"] for r in results} == {"dynscope-recompile"}
    lines = {r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in results}
    assert lines == {line_of("recompiles.py", "def scaled_softmax"), line_of("recompiles.py", "def forward")}
    junit = tmp_path / "junit.xml"
    assert main(["check", capture, "--max-recompiles", "1", "--format", "github", "--junit", str(junit)]) == 1
    annotations = capsys.readouterr().out.splitlines()
    assert len([a for a in annotations if a.startswith("::error file=examples/recompiles.py,line=")]) == 4
    failure = junit.read_text()
    assert failure.count("recompile of ") == 4 and "4 recompiles (at most 1 allowed)" in failure


def test_errors_over_their_limit_are_results(tmp_path, capsys):
    from fake_capture import FakeCapture

    capture = FakeCapture(tmp_path / "e.dynscope").compile(
        "0/0", line=12, fail_type="BackendCompilerFailed", fail_reason="boom").close()
    code, log = check_sarif(capsys, str(capture), "--max-errors", "0")
    validate(log)
    [result] = log["runs"][0]["results"]
    assert code == 1 and result["ruleId"] == "dynscope-compile-error"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 12
