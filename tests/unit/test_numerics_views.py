"""A numerics check (``dynscope numerics``'s NumericsChecked event) as every view reads it: the read model,
the error series and growth marks, the summary JSON / terminal / Markdown sections, and the remedy
table's "try:" lines. Captures are written through the contract (numerics_captures.py); no torch."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import numerics_captures
import pytest
from fake_capture import FakeCapture

from dynscope import events
from dynscope.analysis.numerics import growth, log10_error
from dynscope.analysis.remedies import TABLE, NumericsFacts, numerics_problem, remedies_for
from dynscope.analysis.run_view import run_view
from dynscope.commands import main
from dynscope.events import DisableFunction, SetConfig
from dynscope.model import Capture
from dynscope.model.fix import Features

SOURCE = numerics_captures.SOURCE_FILE  # the relu example's file, as the capture names it


@pytest.fixture
def relu_bug(tmp_path: Path) -> Path:
    return numerics_captures.relu_bug(tmp_path / "relu_bug.dynscope")


def _run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


def test_the_first_suspect_and_the_growth_are_read_from_the_event(relu_bug: Path) -> None:
    with Capture.open(str(relu_bug)) as capture:
        n = run_view(capture).numerics
        assert n is not None and capture.not_understood() == {}
        assert n.verdict == "suspect" and n.suspect_count == 6 and n.nondeterministic_count == 0
        first = n.first_suspect
        assert first is not None
        assert (first.index, first.node, first.op, first.kernel, first.source) == (
            5, "relu", "aten.relu.default", "cpp_fused_relu_0", f"{SOURCE}:17")
        [series] = n.series
        assert series.label == "graph 0/0 forward" and [p.node.index for p in series.points] == list(range(12))
        # growth: the relu's jump from rounding noise, then 2 -> 40 and 1 -> 120; not the small steps before it
        assert [g.node for g in n.growth_nodes] == ["relu", "mm_1", "sum_2"]
        assert [p.first_suspect for p in series.points].index(True) == 5
        assert n.problem is not None and (n.problem.file, n.problem.line, n.problem.function) == (
            SOURCE, 17, "forward")


def test_a_run_not_checked_has_no_numerics_anywhere(tmp_path: Path) -> None:
    path = FakeCapture(tmp_path / "plain.dynscope").compile("0/0").close()
    with Capture.open(str(path)) as capture:
        assert run_view(capture).numerics is None
    code, out = _run(["summary", "--json", str(path)])
    assert code == 0 and "numerics" not in json.loads(out)
    assert "Numerics" not in _run(["summary", str(path)])[1]
    assert "numerics" not in _run(["report", "--format", "md", str(path)])[1]


def test_an_event_of_the_wrong_shape_is_counted_not_guessed(tmp_path: Path) -> None:
    fake = FakeCapture(tmp_path / "bad.dynscope").compile("0/0")
    fake.writer.append(events.NumericsChecked.KIND, {"verdict": "suspect", "nodes": [{"graph": 3}]})
    path = fake.close()
    with Capture.open(str(path)) as capture:
        assert run_view(capture).numerics is None
        assert events.NumericsChecked.KIND in capture.not_understood()


def test_a_first_suspect_index_out_of_range_reads_as_no_suspect(tmp_path: Path) -> None:
    fake = FakeCapture(tmp_path / "odd.dynscope").compile("0/0")
    events.write(fake.writer, events.NumericsChecked(verdict="suspect", first_suspect=7, nodes=()))
    with Capture.open(str(fake.close())) as capture:
        n = run_view(capture).numerics
        assert n is not None and n.first_suspect is None and n.hints == ()


def test_summary_json_names_the_first_suspect(relu_bug: Path) -> None:
    code, out = _run(["summary", "--json", str(relu_bug)])
    doc = json.loads(out)["numerics"]
    assert code == 0
    assert doc["verdict"] == "suspect" and doc["suspects"] == 6 and doc["nondeterministic"] == 0
    assert doc["criterion"].startswith("a node is suspect when its compiled error exceeds 10 ×")
    first = doc["first_suspect"]
    assert (first["node"], first["op"], first["kernel"], first["file"], first["line"]) == (
        "relu", "aten.relu.default", "cpp_fused_relu_0", SOURCE, 17)
    assert [g["node"] for g in doc["growth"]] == ["relu", "mm_1", "sum_2"]
    assert any("torch.compiler.disable" in t for t in doc["try"])


def test_within_and_nondeterministic_blame_no_node(tmp_path: Path) -> None:
    within = numerics_captures.within(tmp_path / "within.dynscope")
    doc = json.loads(_run(["summary", "--json", str(within)])[1])["numerics"]
    assert (doc["verdict"], doc["suspects"], doc["first_suspect"], doc["try"]) == ("within", 0, None, [])
    assert doc["program_dtype"] == "bfloat16"
    varying = numerics_captures.nondeterministic(tmp_path / "nd.dynscope")
    doc = json.loads(_run(["summary", "--json", str(varying)])[1])["numerics"]
    assert (doc["verdict"], doc["suspects"], doc["nondeterministic"], doc["first_suspect"]) == (
        "nondeterministic", 0, 1, None)
    text = _run(["summary", str(varying)])[1]
    assert "nondeterministic: scatter_add (aten.scatter_add.default)" in text


def test_terminal_and_markdown_sections(relu_bug: Path) -> None:
    code, text = _run(["summary", str(relu_bug)])
    assert code == 0
    assert "Numerics (dynscope numerics): compiled and eager part ways at relu (aten.relu.default): 6 suspect nodes" in text
    assert "kernel cpp_fused_relu_0" in text and f"{SOURCE}:17 in forward" in text
    assert "try: keep forward" in text
    md = _run(["report", "--format", "md", str(relu_bug)])[1]
    assert "#### dynscope numerics" in md
    assert "first suspect: `relu` (`aten.relu.default`), kernel `cpp_fused_relu_0`" in md
    assert f"at `{SOURCE}:17`" in md


def test_log10_and_growth() -> None:
    assert log10_error(0.0) == -12 and log10_error(100.0) == 2 and log10_error(math.inf) is None
    assert growth(1e-7, 1.0) and not growth(1.0, 9.0) and growth(1.0, math.inf) and not growth(math.nan, 1.0)
    assert not growth(0.0, 5e-12)  # noise around zero is not growth


# -- the remedy table's numerics entries -----------------------------------------------------------

FEATURES = Features(configs={"torch._inductor.config.emulate_precision_casts": False,
                             "torch._inductor.config.fallback_random": False},
                    functions=frozenset({"compiler_disable"}), compiled_callables=(("forward", "/p/model.py"),),
                    program_root="/p")


def _suspect(op: str, function: str = "block", dtype: str = "float32") -> NumericsFacts:
    node = events.NumericsNode("0/0", "forward", 3, "n", op, 1e-3, 1.0, "cpp_fused_0", "/p/model.py:9",
                               (events.BreakFrame("/p/model.py", 9, function, "y = f(x)"),), suspect=True)
    facts = numerics_problem(node, dtype, ("forward", "/p/model.py")).facts
    assert isinstance(facts, NumericsFacts)
    return facts


def _remedies(facts: NumericsFacts) -> list[object]:
    node = events.NumericsNode("0/0", "forward", 3, "n", facts.op, 1e-3, 1.0, "", "/p/model.py:9",
                               (events.BreakFrame("/p/model.py", 9, facts.function, ""),), suspect=True)
    problem = numerics_problem(node, facts.program_dtype, ("forward", "/p/model.py"))
    return [r.action for r in remedies_for(problem, FEATURES)]


def test_numerics_remedies_are_typed_actions_fix_could_try() -> None:
    bf16 = _suspect("aten.add.Tensor", dtype="bfloat16")
    assert _remedies(bf16) == [SetConfig("torch._inductor.config", "emulate_precision_casts", True),
                               DisableFunction("/p/model.py", "block", 9)]
    assert _remedies(_suspect("aten.native_dropout.default")) == [
        SetConfig("torch._inductor.config", "fallback_random", True), DisableFunction("/p/model.py", "block", 9)]
    # the suspect is in the compiled frame itself: disabling it would compile nothing, so it is not tried
    assert _remedies(_suspect("aten.relu.default", function="forward")) == []
    # a torch whose Inductor has no such setting (not recorded in Features): not tried
    problem = numerics_problem(events.NumericsNode("0/0", "forward", 3, "n", "aten.add.Tensor", 0, 1, "", "/p/m.py:2"),
                               "float16")
    assert remedies_for(problem, Features()) == []


def test_numerics_hints_are_the_tables() -> None:
    from dynscope.analysis.remedies import hints_for

    assert {e.name for e in TABLE if "numerics" in e.serves} == {
        "emulate_precision_casts", "fallback_random", "numerics_compiler_disable"}
    bf16 = hints_for("numerics", _suspect("aten.add.Tensor", dtype="bfloat16"))
    assert bf16[0].startswith("torch._inductor.config.emulate_precision_casts = True") and len(bf16) == 2
    random = hints_for("numerics", _suspect("aten.bernoulli.p"))
    assert random[0].startswith("torch._inductor.config.fallback_random = True")
    in_frame = hints_for("numerics", _suspect("aten.relu.default", function="forward"))
    assert in_frame == ["keep aten.relu.default in eager: move line 9 of forward (model.py) into a helper with "
                        "@torch.compiler.disable above its `def` (disabling forward itself would compile nothing of it)"]
    assert hints_for("numerics", _suspect("aten.add.Tensor")) == [
        "keep block (model.py) in eager: put @torch.compiler.disable above `def block` (it runs uncompiled, so its "
        "numbers are eager's)"]
