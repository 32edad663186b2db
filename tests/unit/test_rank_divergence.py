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
    assert [(s["what"], s["line"]) for s in doc["sequences"][0]["steps"]] == [("compile", 15), ("collective", 15)]
    assert [s["what"] for s in doc["sequences"][1]["steps"]] == [
        "compile", "graph_break", "compile", "collective", "recompile", "graph_break", "recompile", "collective"]
    first = doc["divergence"][0]
    assert {k: first[k] for k in ("what", "ranks", "line", "function", "first")} == {
        "what": "graph_break", "ranks": [1], "line": 18, "function": "step", "first": True}


def test_a_different_input_shape_on_one_rank_is_a_compile_divergence(tmp_path):
    """Hand-written logs: three ranks compile f at /m.py:7; rank 2's graph input is [8], the others' [4]."""
    ids = '"frame_id": 0, "frame_compile_id": 0, "attempt": 0'
    for rank, size in ((0, 4), (1, 4), (2, 8)):
        (tmp_path / f"dedicated_log_torch_trace_rank_{rank}_x.log").write_text(
            f'V1123 22:29:31.000000 1 torch/x.py:1] {{"str": ["/m.py", 0]}}\n'
            f'V1123 22:29:31.100000 1 torch/x.py:1] {{"dynamo_start": {{"stack": [{{"line": 7, "name": "f", '
            f'"filename": 0}}]}}, {ids}}}\n'
            f'V1123 22:29:31.200000 1 torch/x.py:1] {{"dynamo_output_graph": {{"sizes": {{"l_x_": [{size}], '
            f'"y": [{size}]}}}}, {ids}, "has_payload": "x"}}\n\tclass GraphModule(torch.nn.Module):\n'
            f'V1123 22:29:31.300000 1 torch/x.py:1] {{"compilation_metrics": {{"co_name": "f", "co_filename": "/m.py",'
            f' "co_firstlineno": 7, "has_guarded_code": true, "graph_op_count": 1}}, {ids}}}\n')
    captures = [Capture.open(d.path) for d in import_logs([str(tmp_path)], str(tmp_path / "c.dynscope"))]
    try:
        found = divergence(captures)
    finally:
        for c in captures:
            c.close()
    assert [(d.what, d.ranks, d.line, d.first) for d in found] == [("compile", (2,), 7, True)]
    assert found[0].detail == ("rank 2 alone compiles f at /m.py:7 for inputs l_x_ [8], "
                               "where the other ranks compile f at /m.py:7 for inputs l_x_ [4]")
