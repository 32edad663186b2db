"""dynscope numerics without torch: the criterion, the first suspect, where a node lives, the
child payload, and the command's usage errors."""

from __future__ import annotations

import math
import os

import pytest

from dynscope.events import BreakFrame, NumericsNode
from dynscope.numerics.criterion import NONFINITE_ERROR, Criterion, exit_status, finite_error, first_suspect, verdict
from dynscope.numerics.where import is_library_file, kernels_by_node, library_roots, source_of, user_stack


def node(name: str, *, suspect: bool = False, nondeterministic: bool = False) -> NumericsNode:
    return NumericsNode(graph="0/0", direction="forward", index=0, node=name, op="aten.relu.default",
                        eager_error=1e-7, compiled_error=1e-7, suspect=suspect, nondeterministic=nondeterministic)


def test_torch_rule_allows_twice_eagers_error_on_large_fp32_tensors():
    rule = Criterion(None, tolerance=1e-5)
    assert not rule.is_suspect(eager_error=1e-3, compiled_error=2e-3 + 0.9e-5, dtype="float32", numel=4096, close=False)
    assert rule.is_suspect(eager_error=1e-3, compiled_error=2e-3 + 1.1e-5, dtype="float32", numel=4096, close=False)


def test_torch_rule_allows_three_times_for_bf16_and_small_tensors():
    rule = Criterion(None, tolerance=0.0)
    assert rule.multiplier("bfloat16", 10**6) == rule.multiplier("float16", 10**6) == 3.0
    assert rule.multiplier("float32", 999) == 3.0 and rule.multiplier("float32", 1000) == 2.0
    assert not rule.is_suspect(eager_error=1.0, compiled_error=2.9, dtype="bfloat16", numel=10**6, close=False)
    assert rule.is_suspect(eager_error=1.0, compiled_error=2.9, dtype="float32", numel=10**6, close=False)


def test_a_given_factor_replaces_torchs_rule():
    rule = Criterion(10.0, tolerance=0.0)
    assert rule.multiplier("bfloat16", 5) == 10.0 and rule.recorded_factor == 10.0
    assert not rule.is_suspect(eager_error=1.0, compiled_error=9.9, dtype="float32", numel=10**6, close=False)
    assert Criterion(None).recorded_factor == 2.0


def test_close_to_eager_is_never_suspect_and_nan_is_judged_against_eager():
    rule = Criterion(None)
    assert not rule.is_suspect(eager_error=0.0, compiled_error=1.0, dtype="float32", numel=10, close=True)
    assert rule.is_suspect(eager_error=1e-7, compiled_error=math.nan, dtype="float32", numel=10, close=False)
    assert not rule.is_suspect(eager_error=math.nan, compiled_error=math.nan, dtype="float32", numel=10, close=False)
    assert not rule.is_suspect(eager_error=math.nan, compiled_error=1e-3, dtype="float32", numel=10, close=False)


def test_the_criterion_says_its_numbers():
    text = Criterion(None, tolerance=1e-5).in_words()
    assert "1e-05" in text and "0.0001" in text and "fp64_ref" in text and "3 for bf16/fp16" in text
    assert "x RMSE(eager - reference)" in Criterion(4.0).in_words() and "> 4 x" in Criterion(4.0).in_words()


def test_non_finite_errors_are_stored_as_the_largest_float():
    assert finite_error(math.inf) == finite_error(math.nan) == NONFINITE_ERROR
    assert finite_error(0.5) == 0.5


def test_first_suspect_is_the_first_in_order_and_nondeterminism_is_not_a_bug():
    nodes = [node("add"), node("relu", suspect=True), node("addmm", suspect=True)]
    assert first_suspect(nodes) == 1 and verdict(nodes) == "suspect" and exit_status("suspect") == 1
    quiet = [node("scatter_add", nondeterministic=True), node("add")]
    assert first_suspect(quiet) is None and verdict(quiet) == "nondeterministic" and exit_status("nondeterministic") == 0
    assert verdict([node("add")]) == "within" and exit_status("within") == 0 and verdict([]) == "within"


OUTPUT_CODE = """
def call(self, args):
    buf0 = empty_strided_cpu((8, 32), (32, 1), torch.float32)
    extern_kernels.addmm(arg1_1, arg2_1, reinterpret_tensor(arg0_1, (16, 32), (1, 16), 0), alpha=1, beta=1, out=buf0)
    run_intermediate_hooks('addmm', locals().get('buf0'))
    buf1 = buf0; del buf0  # reuse
    cpp_fused_relu_0(buf1)
    run_intermediate_hooks('relu', locals().get('buf1'))
    triton_poi_fused_add_1.run(buf1, buf3, 256, stream=stream0)
    run_intermediate_hooks('add', buf3)
    run_intermediate_hooks('relu', buf3)
"""


def test_a_nodes_kernel_is_the_launch_before_its_last_hook():
    # relu's buffer is finished in place by the Triton kernel after the C++ one: the last writer computes it
    assert kernels_by_node(OUTPUT_CODE) == {"addmm": "", "relu": "triton_poi_fused_add_1", "add": "triton_poi_fused_add_1"}


STACK = '''  File "/home/u/train.py", line 40, in main
    out = model(x)
  File "/usr/lib/python3/site-packages/torch/nn/modules/module.py", line 1775, in _call_impl
    return forward_call(*args, **kwargs)
  File "/home/u/model.py", line 12, in forward
    return torch.relu(h)
'''


def test_the_user_stack_leaves_torch_out_and_the_source_is_its_innermost_line():
    stack = user_stack(STACK, ("/usr/lib/python3/site-packages/torch",))  # where this stack's torch lives
    assert stack == (BreakFrame("/home/u/train.py", 40, "main", "out = model(x)"),
                     BreakFrame("/home/u/model.py", 12, "forward", "return torch.relu(h)"))
    assert source_of(stack) == "/home/u/model.py:12"
    assert user_stack(None) == () and source_of(()) == ""


def test_a_users_folder_named_torch_or_dynscope_is_still_the_users(tmp_path):
    """Frames are torch's or dynscope's by the real install folders, not by a folder's name."""
    import dynscope

    installed = os.path.dirname(os.path.realpath(dynscope.__file__))
    mine = tmp_path / "dynscope" / "torch"  # a checkout named dynscope, code under a folder named torch
    mine.mkdir(parents=True)
    (mine / "model.py").write_text("")
    stack = (f'  File "{mine / "model.py"}", line 7, in forward\n    return torch.relu(h)\n'
             f'  File "{installed}/numerics/engine.py", line 99, in run\n    out = node(x)\n'
             f'  File "/opt/site-packages/torch/nn/modules/module.py", line 1775, in _call_impl\n    return f()\n'
             '  File "<eval_with_key>.3", line 5, in forward\n    relu = torch.relu(x)\n')
    kept = user_stack(stack, ("/opt/site-packages/torch", installed))
    assert kept == (BreakFrame(str(mine / "model.py"), 7, "forward", "return torch.relu(h)"),)
    assert source_of(kept) == f"{mine / 'model.py'}:7"
    # the default roots are this interpreter's real folders: dynscope's (by its links too) and torch's
    roots = library_roots()
    assert installed in roots and not is_library_file(str(mine / "model.py"), roots)
    assert is_library_file(os.path.join(installed, "numerics", "where.py"), roots)
    assert is_library_file(os.path.join(installed, "tui", "app.py"), roots)  # a link to the top-level tui/
    assert not is_library_file(installed + "_fork/model.py", roots)  # a prefix of the name is not the folder


def test_the_child_payload_is_checked():
    from dynscope.numerics.child import NumericsOptions
    from dynscope.runner.spec import SpecError

    options = NumericsOptions(3.0, 1e-5)
    assert NumericsOptions.from_payload(options.extension().payload) == options
    assert NumericsOptions.from_payload('{"factor": null, "tolerance": 0}') == NumericsOptions(None, 0.0)
    for bad in ('{"factor": 0, "tolerance": 1e-5}', '{"factor": 2, "tolerance": -1}', '{"tolerance": "x"}', "[]",
                '{"factor": true, "tolerance": 1}'):
        with pytest.raises(SpecError):
            NumericsOptions.from_payload(bad)


@pytest.mark.parametrize("argv, says", [
    (["numerics"], "numerics needs a program to run"),
    (["numerics", "--factor", "0", "x.py"], "--factor must be a positive number"),
    (["numerics", "--factor", "nan", "x.py"], "--factor must be a positive number"),
    (["numerics", "--tolerance", "-1", "x.py"], "--tolerance must be a number, not negative"),
    (["numerics", "--yes", "x.py"], "--yes goes with --from"),
    (["numerics", "--from", "/nonexistent.dynscope"], "no such capture"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, says, capsys):
    from dynscope.commands import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err
