"""Where ranks diverge, read from the recorded two-rank TORCH_TRACE logs (torch-free)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynscope.analysis.ranks import divergence, rank_differences
from dynscope.analysis.summary import summary_set_document
from dynscope.model import Capture
from dynscope.model.collectives import parse_collectives
from dynscope.trace_import import import_logs

RANKS = Path(__file__).resolve().parent.parent / "data" / "torch_trace" / "rank_divergence"


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks") / "run.dynscope"
    captures = [Capture.open(d.path) for d in import_logs([str(RANKS)], str(out))]
    yield captures
    for c in captures:
        c.close()


def test_collectives_come_from_the_printed_graph():
    graph = '''
        tensor: "f32[1][1]cpu" = torch.ops._c10d_functional.all_reduce(total, 'sum', '0')
        wait_tensor: "f32[1][1]cpu" = torch.ops._c10d_functional.wait_tensor(tensor);  tensor = None
        gathered: "bf16[8, 4][4, 1]cuda:0" = torch.ops._c10d_functional.all_gather_into_tensor.default(x, 2, '3')
    '''
    found = parse_collectives(graph, "2/0")
    assert [(k.op, k.group, k.shape, k.order) for k in found] == [
        ("all_reduce", "0", "f32[1]", 0), ("all_gather_into_tensor", "3", "bf16[8, 4]", 1)]


def test_each_rank_collectives_per_graph(two_ranks):
    rank0, rank1 = two_ranks
    assert [(k.compile_id, k.op, k.shape) for k in rank0.collectives()] == [("0/0", "all_reduce", "f32[1]")]
    # On rank 1 the print() broke the graph: its all_reduce is in the resume function's graphs.
    assert [(k.compile_id, k.op) for k in rank1.collectives()] == [("1/0", "all_reduce"), ("1/1", "all_reduce")]


def test_the_first_divergence_is_rank_one_breaking_at_line_18(two_ranks):
    found = divergence(two_ranks)
    first = found[0]
    assert first.first and first.what == "graph_break" and first.ranks == (1,)
    assert (Path(first.file).name, first.line, first.function) == ("rank_divergence.py", 18, "step")
    assert "rank 1 alone breaks at" in first.detail
    assert first.detail.endswith("so its collectives run in a different graph order: hang risk")
    by_kind = {d.what: d for d in found[1:]}
    assert by_kind["recompile"].ranks == (1,) and by_kind["recompile"].line == 15
    assert "size mismatch" in by_kind["recompile"].detail
    assert by_kind["collective"].function == "torch_dynamo_resume_in_step_at_18"


def test_identical_ranks_do_not_diverge(two_ranks):
    rank0, _ = two_ranks
    assert divergence([rank0, rank0]) == ()
    assert rank_differences([rank0, rank0]).same


def test_summary_set_document(two_ranks):
    doc = summary_set_document(two_ranks)
    assert doc["schema"] == "dynscope.summary-set/1"
    assert [s["ranks"][0]["rank"] for s in doc["summaries"]] == [0, 1]
    assert doc["summaries"][1]["imported"]["format"] == "TORCH_TRACE"
    first = doc["divergence"][0]
    assert {k: first[k] for k in ("what", "ranks", "line", "function", "first")} == {
        "what": "graph_break", "ranks": [1], "line": 18, "function": "step", "first": True}
