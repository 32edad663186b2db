"""What dynscope records equals what torch itself recorded in the same run.

Each case runs an example under ``dynscope.capture()`` in a fresh process that then dumps
torch's own counters, graph-break reasons and guard failures (tests/programs/torch_record.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO, run_dynscope

from dynscope.model import Capture

RECORDER = Path(__file__).parent.parent / "programs" / "torch_record.py"


def _record(directory: Path, example: str, args: tuple[str, ...], *, keep_caches: bool = False,
            env: dict[str, str] | None = None) -> tuple[Capture, dict]:
    capture_path, out = directory / "run.dynscope", directory / "torch.json"
    result = subprocess.run(
        [sys.executable, str(RECORDER), *(["--keep-caches"] if keep_caches else []), str(capture_path), str(out),
         str(EXAMPLES / example), *args],
        capture_output=True, text=True, cwd=REPO, timeout=900, env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return Capture.open(str(capture_path)), json.loads(out.read_text())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    made: dict[tuple[str, ...], tuple[Capture, dict]] = {}

    def record(example: str, *args: str) -> tuple[Capture, dict]:
        key = (example, *args)
        if key not in made:
            made[key] = _record(tmp_path_factory.mktemp("fidelity"), example, args)
        return made[key]

    return record


@pytest.fixture(scope="module")
def recorded_warm(tmp_path_factory):
    """(cold capture, warm capture, torch's record of the warm run): the example recorded with the
    caches off, then twice with the caches on in one fresh cache directory (the first fills it,
    the second is the warm run), as ``explain --cold`` and ``explain`` record it."""
    made: dict[tuple[str, ...], tuple[Capture, Capture, dict]] = {}

    def record(example: str, *args: str) -> tuple[Capture, Capture, dict]:
        key = (example, *args)
        if key not in made:
            cold, _ = _record(tmp_path_factory.mktemp("fidelity-cold"), example, args)
            caches = tmp_path_factory.mktemp("fidelity-caches")
            env = {"TORCHINDUCTOR_CACHE_DIR": str(caches), "TRITON_CACHE_DIR": str(caches / "triton")}
            _record(tmp_path_factory.mktemp("fidelity-fill"), example, args, keep_caches=True, env=env)
            warm, torch_record = _record(tmp_path_factory.mktemp("fidelity-warm"), example, args, keep_caches=True,
                                         env=env)
            made[key] = (cold, warm, torch_record)
        return made[key]

    return record


BACKENDS = ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.inductor)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_breaks_match_torch(recorded, backend):
    capture, torch_record = recorded("graph_breaks.py", "--backend", backend)
    breaks = capture.graph_breaks()
    torch_breaks = [r for r in torch_record["graph_break_reasons"] if r["graph_break"]]

    # Same number of breaks, at the same user file and line.
    assert len(breaks) == len(torch_breaks) == 4
    assert sorted((b.location.file, b.location.line) for b in breaks) == sorted(
        (r["file"], r["line"]) for r in torch_breaks
    )
    # Same reason text: torch counts a break under its message (data-dependent branching under
    # "unimplemented", the others under "graph_break"), and each of ours carries that message.
    counted = Counter()
    for category in ("graph_break", "unimplemented"):
        counted.update(torch_record["counters"].get(category, {}))
    ours = Counter(b.message for b in breaks)
    assert {m: ours[m] for m in torch_record["counters"].get("graph_break", {})} == torch_record["counters"]["graph_break"]
    # A break torch counted nowhere (before 2.7 a data-dependent jump) is one it listed, at that line,
    # under a reason it did not count either.
    torch_reason_at = {r["line"]: r["reason"] for r in torch_breaks}
    for b in breaks:
        if not counted[b.message]:
            assert not counted[torch_reason_at[b.location.line]], b.message
    assert all(ours[m] == counted[m] for m in ours if counted[m])


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_reason_is_torchs_graph_break_log_text(recorded, backend):
    """torch's graph-break log (the dynamo_graph_break_reason artifact) says the same."""
    capture, _ = recorded("graph_breaks.py", "--backend", backend)
    logged = []
    for event in capture.reader.events(["artifact:dynamo_graph_break_reason"]):
        text = capture.reader.payload(event.payload_hash)
        where = re.search(r"Graph break in user code at (.+):(\d+)", text)
        # "Graph Break Reason: " since torch 2.7, "Reason: " before.
        reason = re.search(r"^(?:Graph Break )?Reason: (.*?)\n+User code traceback:", text, re.S | re.M).group(1)
        logged.append((where.group(1), int(where.group(2)), reason))
    ours = [(b.location.file, b.location.line, b.reason) for b in capture.graph_breaks()]
    assert len(logged) == 4 and sorted(ours) == sorted(logged)  # torch logged each of the four breaks


def test_break_details_are_structured(recorded):
    capture, _ = recorded("graph_breaks.py", "--backend", "eager")
    by_line = {b.location.line: b for b in capture.graph_breaks()}
    source = (EXAMPLES / "graph_breaks.py").read_text().splitlines()
    printing = by_line[next(i for i, line in enumerate(source, 1) if line.strip().startswith("print("))]
    if not capture.run.probes["graph_breaks"]:
        # torch < 2.7 has no structured graph breaks: the capture says the probe was unavailable and the
        # break is read from torch's log text, with no type or id made up.
        assert (printing.gb_type, printing.gb_id, printing.hints) == (None, None, ())
        assert "print" in printing.message and printing.location.code.startswith('print("block output mean computed")')
        assert printing.resumed_into in {c.function for c in capture.compiles()}
        pytest.skip(f"torch {capture.run.torch_version} has no structured graph breaks (gb_type, hints)")
    assert printing.gb_type == "Failed to trace builtin operator"
    assert printing.gb_id == "GB0059" and printing.doc_link.endswith("gb0059.html")
    assert "print" in printing.explanation and printing.hints
    assert printing.location.code.startswith('print("block output mean computed")')
    assert printing.location.function == "forward"
    # Dynamo continued after the print in a resume function, which it then compiled.
    assert printing.resumed_into in {c.function for c in capture.compiles()}


def test_recompiles_match_torch_guard_failures(recorded):
    capture, torch_record = recorded("recompiles.py", "--backend", "eager")
    _recompiles_match_torch(capture, torch_record)


def _recompiles_match_torch(capture: Capture, torch_record: dict) -> None:
    torch_reasons = Counter()
    for entry in torch_record["guard_failures"]:
        for reason in entry["reasons"]:
            torch_reasons[(entry["function"], _strip(reason))] += 1
    ours = Counter()
    for recompile in capture.recompiles():
        for failure in recompile.failures:
            ours[(recompile.function, _strip(failure.reason))] += 1
    assert ours == torch_reasons
    assert len(capture.recompiles()) == 4  # shape 4->6, temperature 2.0->2, 2->3, mode sum->max


def test_recompile_says_which_guard_and_what_value(recorded):
    capture, _ = recorded("recompiles.py", "--backend", "eager")
    by_guard = {r.failures[0].guard: r for r in capture.recompiles()}
    shape = next(r for g, r in by_guard.items() if "size mismatch" in g)
    assert (shape.failures[0].expected, shape.failures[0].actual) == ("4", "6")
    mode = next(r for g, r in by_guard.items() if "mode" in g)
    assert mode.failures[0].expected == "'sum'" and mode.failures[0].actual == "'max'"
    assert mode.function == "forward"


def test_summary_json_schema_on_a_real_run(make_capture):
    path = make_capture("graph_breaks.py", "--backend", "aot_eager")
    result = run_dynscope("summary", str(path), "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["torch_version"].startswith("2.") and doc["ranks"] == [{"rank": 0, "world_size": 1}]
    assert {c["compile_id"] for c in doc["compiles"]} == {f"{i}/0" for i in range(5)}
    for compile_ in doc["compiles"]:
        assert set(compile_) >= {"compile_id", "function", "file", "line", "status", "stages"}
        assert compile_["stages"][:2] == ["bytecode", "dynamo"] and "aot_inference" in compile_["stages"]
    resumed = [c["function"] for c in doc["compiles"] if c["function"].startswith("torch_dynamo_resume_in_forward_at_")]
    assert len(resumed) == 4
    assert len(doc["graph_breaks"]) == 4
    for item in doc["graph_breaks"]:
        assert set(item) >= {"reason", "gb_type", "gb_id", "file", "line", "function", "count", "compile_ids"}
        assert item["count"] == 1 and item["file"].endswith("graph_breaks.py")
    assert doc["recompiles"] == [] and doc["errors"] == []


# -- warm: what Dynamo decides is recorded the same with the caches on -------------------------

def _same_in_any_process(text: str | None) -> str | None:
    """Object ids and addresses (an ID_MATCH guard's) differ from one process to the next."""
    return None if text is None else re.sub(r"\b(0x[0-9a-f]+|\d{7,})\b", "<id>", text)


def _decisions(capture: Capture) -> dict[str, list]:
    """Everything Dynamo decides, comparable between two runs: its breaks, each compile's guards
    and its recompiles."""
    same = _same_in_any_process
    compiles = capture.compiles()
    return {
        "compiles": [(c.compile_id, c.function, c.line, c.status) for c in compiles],
        "breaks": sorted((b.location.file, b.location.line, b.reason) for b in capture.graph_breaks()),
        "guards": [(c.compile_id, sorted((g.kind, same(g.source), same(g.check)) for g in capture.guards(c.compile_id)))
                   for c in compiles],
        "recompiles": [(r.compile_id, r.function, same(r.reason),
                        [(same(f.guard), same(f.expected), same(f.actual)) for f in r.failures])
                       for r in capture.recompiles()],
    }


@pytest.mark.inductor
@pytest.mark.parametrize("example", ["graph_breaks.py", "recompiles.py"])
def test_a_warm_run_records_what_dynamo_decides_as_a_cold_one_and_as_torch(recorded_warm, example):
    cold, warm, torch_record = recorded_warm(example, "--backend", "inductor")
    lookups = warm.cache_lookups()
    assert lookups and all(x.state == "hit" for x in lookups), [(x.layer, x.state) for x in lookups]  # really warm
    assert not cold.cache_lookups() and not cold.run.keep_caches  # really cold
    assert _decisions(warm) == _decisions(cold)
    assert all(_decisions(warm)["guards"][i][1] for i in range(len(warm.compiles())))  # guards were recorded
    # and against torch's own record of the warm run
    torch_breaks = [r for r in torch_record["graph_break_reasons"] if r["graph_break"]]
    assert sorted((b.location.file, b.location.line) for b in warm.graph_breaks()) == \
        sorted((r["file"], r["line"]) for r in torch_breaks)
    if example == "recompiles.py":
        _recompiles_match_torch(warm, torch_record)
    else:
        assert len(torch_breaks) == 4
    # On a hit the output code and kernels are the cache entry's: recorded all the same.
    assert all(warm.stage(c.compile_id, "output_code").recorded and warm.kernels(c.compile_id)
               for c in warm.compiles() if c.graph_op_count)


def _strip(reason: str) -> str:
    """torch's '0/1: guard  # code  # where\\nUser stack trace: ...' -> 'guard'."""
    first = reason.split("\n", 1)[0]
    first = re.sub(r"^!?[\d/_]+: ", "", first)
    return first.split("  #", 1)[0].strip()
