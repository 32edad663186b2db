"""``minify --from CAPTURE --suspect``: the numerics check's first suspect placed in the rebuilt Dynamo
graph and the subgraph that ends there (its ancestors only), without torch."""

from __future__ import annotations

from pathlib import Path

import numerics_captures
import pytest
from fake_capture import FakeCapture

from dynscope.commands import main
from dynscope.errors import DynscopeError
from dynscope.minifier.fragment import Fragment
from dynscope.minifier.suspect import Suspect, end_node, first_suspect, op_word, subgraph_ending_at

SOURCE = numerics_captures.SOURCE_FILE  # the relu example's file, as the capture names it

TENSOR = {"shape": [4], "stride": [1], "dtype": "float32", "device": "cpu"}


def _node(name: str, op: str, target: str, inputs: tuple[str, ...] = (), line: int | None = None) -> dict:
    node = {"name": name, "op": op, "target": target, "args": [{"node": i} for i in inputs], "kwargs": {},
            "inputs": list(inputs), "tensor": TENSOR}
    if line is not None:
        node["stack_trace"] = (f'  File "/p/{SOURCE}", line {line}, in forward\n'
                               f"    line {line} of forward\n")
    return node


def _graph() -> Fragment:
    nodes = [
        _node("l_x_", "placeholder", "L_x_"), _node("l_w_", "placeholder", "L_w_"), _node("l_z_", "placeholder", "L_z_"),
        _node("add", "call_function", "operator.add", ("l_x_", "l_w_"), 14),
        _node("mul", "call_function", "torch.mul", ("add", "l_w_"), 15),
        _node("sin", "call_function", "torch.sin", ("add",), 16),  # a sibling branch: not an ancestor
        _node("relu_1", "call_function", "torch.relu", ("mul",), 17),
        _node("cos", "call_function", "torch.cos", ("l_z_",), 17),  # same line, another op
        _node("add_1", "call_function", "operator.add", ("relu_1", "sin"), 18),
        {"name": "output", "op": "output", "target": "output", "args": [{"node": "add_1"}], "kwargs": {},
         "inputs": ["add_1", "cos"]},
    ]
    inputs = [{"kind": "tensor", "shape": [4], "stride": [1], "dtype": "float32", "device": "cpu",
               "requires_grad": False}] * 3
    return Fragment({"graph_id": 1, "encoding": 2, "nodes": nodes}, inputs)


def _suspect(**changes) -> Suspect:
    fields = {"compile_id": "0/0", "direction": "forward", "node": "relu", "op": "aten.relu.default",
              "kernel": "cpp_fused_relu_0", "file": SOURCE, "line": 17, "origins": ("relu_1",)}
    return Suspect(**{**fields, **changes})


def test_the_subgraph_ends_at_the_node_and_holds_its_ancestors_only():
    cut = subgraph_ending_at(_graph(), "relu_1")
    assert [n["name"] for n in cut.compute_nodes] == ["add", "mul", "relu_1"]
    assert [n["name"] for n in cut.placeholders] == ["l_x_", "l_w_"] and len(cut.inputs) == 2
    assert cut.nodes[-1]["op"] == "output" and cut.nodes[-1]["inputs"] == ["relu_1"]
    with pytest.raises(DynscopeError):
        subgraph_ending_at(_graph(), "l_x_")  # not a compute node


def test_the_suspect_is_placed_by_its_kernels_origin_then_its_name_then_its_line():
    graph = _graph()
    assert end_node(graph, _suspect()) == "relu_1"
    # no provenance: the node at its source line computing the same op (not the cos on that line)
    assert end_node(graph, _suspect(origins=())) == "relu_1"
    # a fused kernel made from several nodes: its last one computing the op, else its last one
    assert end_node(graph, _suspect(origins=("add", "mul"), op="aten.mul.Tensor")) == "mul"
    assert end_node(graph, _suspect(origins=("add", "mul"))) == "mul"
    assert end_node(graph, _suspect(node="sin", op="aten.sin.default", origins=(), line=None)) == "sin"


def test_names_from_the_capture_only_select_among_the_rebuilt_nodes():
    hostile = _suspect(node="__import__('os').system('x')", origins=("l_x_", "output", "__builtins__"), line=99)
    with pytest.raises(DynscopeError, match="cannot be placed in compile 0/0's Dynamo graph"):
        end_node(_graph(), hostile)


def test_op_words():
    assert {op_word(t) for t in ("aten.relu.default", "torch.relu", "torch.nn.functional.relu", "relu_")} == {"relu"}
    assert op_word("aten.sum.dim_IntList") == "sum" and op_word("operator.add") == "add"


def test_first_suspect_is_read_from_the_capture(tmp_path: Path):
    suspect = first_suspect(str(numerics_captures.relu_bug(tmp_path / "relu.dynscope")))
    assert (suspect.compile_id, suspect.node, suspect.kernel, suspect.file, suspect.line, suspect.origins) == (
        "0/0", "relu", "cpp_fused_relu_0", SOURCE, 17, ("relu",))


@pytest.mark.parametrize(("make", "expected"), [
    (lambda p: FakeCapture(p).compile("0/0").close(), "has no numerics check"),
    (numerics_captures.within, "found no suspect node (verdict: within)"),
    (numerics_captures.nondeterministic, "found no suspect node (verdict: nondeterministic)"),
])
def test_minify_suspect_without_a_suspect_is_one_line(tmp_path: Path, capsys, make, expected):
    path = make(tmp_path / "run.dynscope")
    assert main(["minify", "--from", str(path), "--suspect", "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err.strip()
    assert expected in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_suspect_needs_from_and_its_own_compile(tmp_path: Path, capsys):
    assert main(["minify", "--suspect", "prog.py"]) != 0
    assert "--suspect goes with --from CAPTURE" in capsys.readouterr().err
    path = numerics_captures.relu_bug(tmp_path / "relu.dynscope")
    assert main(["minify", "--from", str(path), "--suspect", "--compile", "1/0"]) != 0
    assert "the first suspect is in compile 0/0, not 1/0" in capsys.readouterr().err
