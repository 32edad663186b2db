"""Real third-party models (Hugging Face transformers, tiny configs built in code, no download):
dynscope's JSON against torch's own log of the same run.

Each program runs once under `dynscope explain` with TORCH_LOGS=graph_breaks,recompiles, so
torch writes its own account of that very run to stderr; the tests hold the capture's summary
JSON to it: one break group per root cause and site, the frames torch skipped, every recompile
and recompile-limit hit named, and no errors where nothing failed.

Select or skip this layer with `-m models` / `-m "not models"`. Eager backend, tiny configs:
about 10 s per model on 2 CPU cores.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import run_dynscope

pytest.importorskip("transformers")
pytestmark = pytest.mark.models

PROGRAMS = Path(__file__).resolve().parent.parent / "programs" / "models"

# torch's log records: "V1124 00:31:33.214000 31005 torch/_dynamo/x.py:5124] [0/0] [__graph_breaks] text"
_RECORD = re.compile(r"^[VIWE]\d{4} [\d:.]+ +\d+ (?P<where>\S+):\d+\] \[(?P<cid>[^\]]+)\] (?:\[(?P<tag>__\w+)\] )?(?P<text>.*)$")
_BREAK_AT = re.compile(
    r"^Graph break (?:\(user stack suppressed due to duplicate graph break\) )?in user code at (?P<file>.+):(?P<line>\d+)$")
_RECOMPILING = re.compile(r"^Recompiling function (?P<function>\S+) in (?P<file>.+):(?P<line>\d+)$")
_LIMIT = re.compile(r"^torch\._dynamo hit config\.(?P<name>\w+) \((?P<limit>\d+)\)$")
_LIMIT_FUNCTION = re.compile(r"^\s*function: '(?P<function>[^']+)' \((?P<file>.+):(?P<line>\d+)\)$")
_SKIPPED = "Failed to handle graph break gracefully"


@dataclass
class TorchLog:
    """What torch's own logs say about one run."""

    breaks: list[dict] = field(default_factory=list)  # {compile_id, file, line, headline, skipped}
    recompiles: list[dict] = field(default_factory=list)  # {compile_id, function, file, line}
    limit_hits: list[dict] = field(default_factory=list)  # {compile_id, function, file, line, limit}


def parse_torch_log(stderr: str) -> TorchLog:
    records: list[dict] = []
    for raw in stderr.splitlines():
        match = _RECORD.match(raw)
        if not match:
            continue
        head = records[-1] if records else None
        same = head is not None and head["cid"] == match["cid"] and head["tag"] == match["tag"]
        starts = _BREAK_AT.match(match["text"]) or _RECOMPILING.match(match["text"]) or _LIMIT.match(match["text"])
        if same and not starts:
            head["lines"].append(match["text"])
        else:
            records.append({"cid": match["cid"], "tag": match["tag"], "lines": [match["text"]]})
    log = TorchLog()
    for r in records:
        first = r["lines"][0]
        if r["tag"] == "__graph_breaks" and (at := _BREAK_AT.match(first)):
            reason = next(line for line in r["lines"] if line.startswith("Graph Break Reason: "))
            reason = reason.removeprefix("Graph Break Reason: ")
            rest = r["lines"][r["lines"].index("Graph Break Reason: " + reason) + 1:]
            # The reason's preamble ends with ':'; then the message, whose first line is the root cause's type.
            headline = next(line for line in rest if line.strip()) if reason.endswith(":") else reason
            log.breaks.append({"compile_id": r["cid"], "file": at["file"], "line": int(at["line"]),
                               "headline": headline.strip(), "skipped": reason.startswith(_SKIPPED)})
        elif r["tag"] == "__recompiles" and (rc := _RECOMPILING.match(first)):
            log.recompiles.append({"compile_id": r["cid"], "function": rc["function"], "file": rc["file"],
                                   "line": int(rc["line"])})
        elif (hit := _LIMIT.match(first)):
            fn = next(m for line in r["lines"] if (m := _LIMIT_FUNCTION.match(line)))
            log.limit_hits.append({"compile_id": r["cid"], "function": fn["function"], "file": fn["file"],
                                   "line": int(fn["line"]), "limit": int(hit["limit"])})
    return log


@dataclass
class ModelRun:
    summary: dict
    torch: TorchLog
    capture: Path
    returncode: int


_RUNS: dict[str, ModelRun] = {}


def model_run(name: str, tmp_path_factory) -> ModelRun:
    """`dynscope explain` of one model program, once per session, with torch's own log of it."""
    if name not in _RUNS:
        capture = tmp_path_factory.mktemp("models") / f"{name}.dynscope"
        env = {"TORCH_LOGS": "graph_breaks,recompiles", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
        result = run_dynscope("explain", "-q", "-o", str(capture), str(PROGRAMS / f"{name}.py"), env=env)
        summary = run_dynscope("summary", str(capture), "--json")
        assert summary.returncode == 0, summary.stderr
        _RUNS[name] = ModelRun(json.loads(summary.stdout), parse_torch_log(result.stderr), capture, result.returncode)
    return _RUNS[name]


@pytest.fixture(scope="module")
def wav2vec2(tmp_path_factory) -> ModelRun:
    return model_run("wav2vec2_train", tmp_path_factory)


@pytest.fixture(scope="module")
def switch(tmp_path_factory) -> ModelRun:
    return model_run("switch_moe", tmp_path_factory)


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> ModelRun:
    return model_run("bert_recompile_limit", tmp_path_factory)


def _torch_groups(log: TorchLog) -> Counter:
    return Counter((b["headline"], b["file"], b["line"]) for b in log.breaks)


def _dynscope_groups(summary: dict) -> Counter:
    return Counter({(g["headline"], g["file"], g["line"]): g["count"] for g in summary["graph_breaks"]})


def assert_same_story(run: ModelRun) -> None:
    """The facts every model run must agree on with torch's log."""
    s, log = run.summary, run.torch
    assert run.returncode == 0
    # One group per root cause and site, with torch's count of it.
    assert _dynscope_groups(s) == _torch_groups(log)
    assert all(g["gb_type"] != "graph break in loop" for g in s["graph_breaks"])
    # The frames torch skipped ("Failed to handle graph break gracefully"), and no errors: nothing failed.
    assert sorted(f["compile_id"] for f in s["skipped_frames"]) == sorted(b["compile_id"] for b in log.breaks
                                                                        if b["skipped"])
    assert s["errors"] == [] and s["totals"]["errors"] == 0
    assert run_dynscope("check", str(run.capture), "--max-errors", "0").returncode == 0
    # Every compile and recompile named; recompiles and limit hits as torch logged them.
    assert all(c["function"] != "?" and c["file"] for c in s["compiles"])
    assert [(r["compile_id"], r["function"], r["file"], r["line"]) for r in s["recompiles"]] == \
        [(r["compile_id"], r["function"], r["file"], r["line"]) for r in log.recompiles]
    assert [{k: h[k] for k in ("compile_id", "function", "file", "line", "limit")}
            for h in s["recompile_limit_hits"]] == log.limit_hits


def test_wav2vec2_loop_breaks_grouped_by_root_cause(wav2vec2):
    assert_same_story(wav2vec2)
    groups = wav2vec2.summary["graph_breaks"]
    in_loop = [g for g in groups if "inside a loop: the whole frame fell back to eager" in g["consequences"]]
    # The mask loop's data-dependent op and the LayerDrop branch: each under its own cause and line.
    assert {(g["headline"], Path(g["file"]).name, g["line"]) for g in in_loop} == {
        ("Data dependent operator", "modeling_wav2vec2.py", 179),
        ("Data-dependent branching", "modeling_wav2vec2.py", 692),
    }
    assert all(g["gb_id"] in ("GB0033", "GB0170") and g["skipped_compile_ids"] for g in in_loop)
    branching = next(g for g in in_loop if g["line"] == 692)
    assert branching["count"] == 2  # the inlined break and the loop's skip: one site, one cause


def test_wav2vec2_skipped_frames_are_not_errors(wav2vec2):
    s = wav2vec2.summary
    assert s["totals"]["skipped_frames"] == len(s["skipped_frames"]) >= 4
    assert {f["headline"] for f in s["skipped_frames"]} >= {"Missing tp_iternext", "Data dependent operator"}
    assert all(f["user_file"] and f["user_line"] for f in s["skipped_frames"])


def test_switch_transformers_dynamic_shape_break_in_expert_loop(switch):
    assert_same_story(switch)
    groups = {(g["headline"], g["line"]): g for g in switch.summary["graph_breaks"]}
    assert ("graph break in loop", 175) not in groups
    assert {f["headline"] for f in switch.summary["skipped_frames"]} >= {"Observed exception"}


def test_bert_recompile_limit_named_and_listed(bert):
    assert_same_story(bert)
    (hit,) = bert.summary["recompile_limit_hits"]
    assert hit["function"] == "wrapper" and hit["limit"] == 2 and hit["limit_name"] == "recompile_limit"
    assert not hit["fatal"] and bert.summary["totals"]["recompile_limit_hits"] == 1
    text = run_dynscope("summary", str(bert.capture))
    assert text.returncode == 0
    assert "Recompile limit hit (1)" in text.stdout and f"compile {hit['compile_id']} hit recompile_limit = 2" in text.stdout
    assert "Unsupported" not in text.stdout and " ? " not in text.stdout


def test_share_of_a_real_model_keeps_no_source_and_no_path(switch, tmp_path):
    """dynscope share on a real transformers model's capture (issue 25 item 4): no line of the
    program and no absolute path of the original in the bundle, raw bytes or inflated payloads
    (tests/share_checks.py), and the bundle tells the same story as the original."""
    from share_checks import leaks, secrets_of

    program = PROGRAMS / "switch_moe.py"
    lines, paths = secrets_of(switch.capture, [program])
    assert leaks(switch.capture, lines, paths)  # the original holds them: this test can fail
    bundle = tmp_path / "bug.dynscope"
    shared = run_dynscope("share", str(switch.capture), "-o", str(bundle), "--source-root", str(PROGRAMS))
    assert shared.returncode == 0, shared.stderr
    assert "source lines replaced" in shared.stdout and "<site-packages>" in shared.stdout
    assert leaks(bundle, lines, paths) == []
    summary = run_dynscope("summary", str(bundle), "--json")
    assert summary.returncode == 0, summary.stderr
    ours = json.loads(summary.stdout)
    assert ours["totals"] == switch.summary["totals"]
    assert [(b["line"], b["count"]) for b in ours["graph_breaks"]] == \
        [(b["line"], b["count"]) for b in switch.summary["graph_breaks"]]
    assert run_dynscope("report", str(bundle), "-o", str(tmp_path / "r.html")).returncode == 0
    assert run_dynscope("compare", str(switch.capture), str(bundle)).returncode == 0
