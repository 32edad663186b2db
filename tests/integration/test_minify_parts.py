"""The minifier's parts on their own: graph encoding and rebuild, the allow-list, graph edits,
failure signatures, traceback attribution, and the worker's isolation. Fast: no Inductor."""

from __future__ import annotations

import json
import operator
import time

import pytest
import torch

from dynscope.minifier.attribution import Frame, attribute
from dynscope.minifier.fragment import Fragment, keep_only, prefix, with_small_inputs
from dynscope.minifier.rebuild import RebuildError, build_module, describe_input, make_inputs, resolve_target
from dynscope.minifier.signature import (
    COMPILE_ERROR,
    Signature,
    crash_signature,
    from_exception,
    normalize_message,
)
from dynscope.minifier.worker import Worker
from dynscope.model.fxgraph import FxGraph, _render_arg, display_form
from dynscope.probes.fx_graphs import _arg, serialize_graph


def traced(fn, *inputs) -> tuple[torch.fx.GraphModule, Fragment]:
    """A Dynamo graph of ``fn`` as the probe records it (structure round-tripped through JSON)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append((gm, json.loads(json.dumps(serialize_graph(gm))), [describe_input(x) for x in example_inputs]))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*inputs)
    gm, graph, specs = graphs[0]
    return gm, Fragment(graph, specs)


def tricky(x, y):
    # tuples vs lists (basic vs advanced indexing), slices, Ellipsis, dtypes, devices,
    # non-finite floats, method calls, operator functions
    a = x[:, 0] + x[..., 1:2].sum(-1)
    b = x[[0, 1]].to(torch.float64).to(dtype=torch.float32, device=torch.device("cpu"))
    c = torch.clamp(y, min=float("-inf"), max=3.5).view((2, 3)).permute(1, 0)
    d = torch.full((2,), float("inf")).nan_to_num(posinf=1.0)
    return a.sum() + b.sum() + c.sum() + operator.mul(d.sum(), 2)


def test_graph_rebuilt_from_structure_computes_the_same():
    x, y = torch.randn(3, 4), torch.randn(6)
    gm, fragment = traced(tricky, x, y)
    assert fragment.graph["encoding"] == 2
    rebuilt = build_module(fragment.graph)
    assert torch.allclose(rebuilt(x, y)[0], gm(x, y)[0])
    assert torch.allclose(rebuilt(x, y)[0], tricky(x, y))


def test_views_see_typed_constants_as_older_captures_stored_them():
    cases = [torch.float32, torch.device("cpu"), torch.device("cuda", 1), torch.strided, torch.channels_last,
             slice(None, 2, None), Ellipsis, 1 + 2j]
    for value in cases:
        assert display_form(_arg(value)) == {"repr": repr(value)}
        assert _render_arg(display_form(_arg(value))) == repr(value)
    assert display_form(_arg(float("-inf"))) == float("-inf")
    assert display_form(_arg((1, [2, (3,)]))) == [1, [2, [3]]]  # tuples and lists alike, as before
    assert display_form(_arg({3: "a"})) == {"3": "a"}
    assert display_form(_arg("x" * 300)) == "x" * 120
    old = {"repr": "x" * 120 + "…"}  # encoding 1 forms pass unchanged
    assert display_form(old) == old and display_form([{"node": "a"}, 2]) == [{"node": "a"}, 2]


def test_model_reads_new_encoding():
    _, fragment = traced(tricky, torch.randn(3, 4), torch.randn(6))
    graph = FxGraph(fragment.graph)
    text = "\n".join(graph.to_text())
    assert "slice(None, None, None)" in text and "Ellipsis" in text and "torch.float64" in text
    returned = graph.nodes[-1].args[0]
    assert isinstance(returned, list) and all(set(a) == {"node"} for a in returned)  # as views read it


@pytest.mark.parametrize("target", ["builtins.eval", "builtins.exec", "builtins.open", "builtins.__import__",
                                    "builtins.getattr", "os.system", "subprocess.run", "torch.load",
                                    "torch.hub.load", "torch.utils.cpp_extension.load_inline", "_operator.call",
                                    "operator.attrgetter", "torch.ops.load_library", "torch.__builtins__"])
def test_allow_list_refuses_what_could_run_code(target):
    with pytest.raises(RebuildError):
        resolve_target(target)


def test_allow_list_admits_graph_operations():
    for target in ("torch.ops.aten.relu.default", "torch.relu", "torch._C._nn.linear", "torch.nn.functional.softmax",
                   "_operator.getitem", "operator.add", "math.sqrt", "builtins.max", "torch.sym_float"):
        assert callable(resolve_target(target))


def test_rebuild_refuses_text_only_constants_and_old_captures():
    graph = {"encoding": 2, "nodes": [
        {"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": {}},
        {"name": "y", "op": "call_function", "target": "torch.add", "args": [{"node": "x"}, {"repr": "Foo()"}],
         "kwargs": {}},
        {"name": "output", "op": "output", "target": "output", "args": [{"node": "y"}], "kwargs": {}},
    ]}
    with pytest.raises(RebuildError, match="cannot rebuild node y: its constant Foo\\(\\) was recorded only as text"):
        build_module(graph)
    with pytest.raises(RebuildError, match="older dynscope"):
        build_module({**graph, "encoding": 1})
    graph["nodes"][1]["op"] = "call_method"
    graph["nodes"][1]["target"] = "register_hook"
    with pytest.raises(RebuildError, match="not an allowed tensor method"):
        build_module(graph)


def chain_fragment() -> Fragment:
    def f(x, w):
        h = torch.relu(x @ w)
        g = torch.sigmoid(h) * 2
        return (g + h).sum(dim=1)

    return traced(f, torch.randn(4, 8), torch.randn(8, 6))[1]


def test_keep_only_turns_missing_values_into_inputs():
    fragment = chain_fragment()
    sigmoid = next(n["name"] for n in fragment.compute_nodes if n["target"] == "torch.sigmoid")
    alone = keep_only(fragment, {sigmoid})
    assert [n["op"] for n in alone.nodes] == ["placeholder", "call_function", "output"]
    assert alone.inputs[0]["shape"] == [4, 6] and alone.inputs[0]["dtype"] == "float32"
    out = build_module(alone.graph)(*make_inputs(alone))
    assert out[0].shape == (4, 6)


def test_prefix_returns_every_value_used_later():
    fragment = chain_fragment()
    first_two = prefix(fragment, 2)  # matmul, relu
    outputs = first_two.nodes[-1]["inputs"]
    assert outputs == [fragment.compute_nodes[1]["name"]]  # relu feeds both later branches; matmul only relu
    assert len(first_two.compute_nodes) == 2


def test_small_inputs_keep_dimension_order():
    spec = {"kind": "tensor", "shape": [8, 16], "stride": [1, 8], "dtype": "float32", "device": "cpu",
            "requires_grad": False}
    graph = {"encoding": 2, "nodes": [
        {"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": {}},
        {"name": "output", "op": "output", "target": "output", "args": [{"node": "x"}], "kwargs": {}}]}
    small = with_small_inputs(Fragment(graph, [spec]), 2)
    assert small.inputs[0]["shape"] == [2, 2] and small.inputs[0]["stride"] == [1, 2]  # still column-major
    assert with_small_inputs(small, 2) is None


def test_recorded_values_are_used_by_name_when_they_fit():
    fragment = chain_fragment()
    names = [p["name"] for p in fragment.placeholders]
    x = torch.full((4, 8), 7.0)
    made = make_inputs(fragment, {names[0]: x, names[1]: torch.zeros(3)})  # the second does not fit
    assert made[0] is x and made[1].shape == (8, 6)


def test_signature_masks_paths_numbers_and_addresses():
    a = "error: 'compile' was not declared in this scope at /tmp/torchinductor_x/ab/c.cpp:18:33"
    b = "In file /tmp/other/zz.cpp:99:1: error: 'compile' was not declared in this scope at /tmp/q/r.cpp:1:2"
    assert normalize_message(a) == normalize_message(b)
    assert normalize_message("size mismatch, got 16 and 32 at 0x7f00aa") == "size mismatch, got N and N at <addr>"
    assert normalize_message("Dimension out of range") != normalize_message("index out of range")


def test_signature_unwraps_backend_errors():
    class InductorError(Exception):
        def __init__(self, inner):
            super().__init__(f"{type(inner).__name__}: {inner}")
            self.inner_exception = inner

    wrapped = from_exception(InductorError(ValueError("bad value 3")), COMPILE_ERROR)
    assert (wrapped.exc_type, wrapped.key) == ("ValueError", "bad value N")
    assert wrapped.same_as(Signature(COMPILE_ERROR, "ValueError", "bad value N", "other detail"))
    assert not wrapped.same_as(Signature("runtime_error", "ValueError", "bad value N"))
    assert crash_signature(-11).key == "SIGSEGV"


def test_attribution_names_the_layer_from_the_traceback():
    site = "/venv/lib/python3.11/site-packages/torch"
    decomposition = [
        Frame("/home/me/train.py", 10, "main"),
        Frame(f"{site}/_dynamo/output_graph.py", 1, "call_user_compiler"),
        Frame(f"{site}/_functorch/aot_autograd.py", 1, "aot_module_simplified"),
        Frame(f"{site}/fx/experimental/proxy_tensor.py", 1, "maybe_handle_decomp", op="aten.gelu.default"),
        Frame("/home/me/train.py", 3, "broken_gelu"),
        Frame(f"{site}/_dynamo/eval_frame.py", 1, "_fn"),
        Frame(f"{site}/_prims_common/__init__.py", 1, "canonicalize_dim"),
    ]
    found = attribute(decomposition)
    assert (found.layer, found.part, found.op) == ("aot_autograd", "decompositions", "aten.gelu.default")
    assert found.user_frame == "/home/me/train.py:3 in broken_gelu"
    lowering = [Frame("/home/me/train.py", 10, "main"), Frame(f"{site}/_dynamo/output_graph.py", 1, "x"),
                Frame(f"{site}/_inductor/graph.py", 1, "run_node", op="aten.relu.default"),
                Frame(f"{site}/_inductor/lowering.py", 1, "wrapped")]
    found = attribute(lowering)
    assert (found.layer, found.part, found.op, found.user_frame) == ("inductor", "lowering", "aten.relu.default", None)


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "fresh-process"])
def test_worker_is_reused_and_survives_a_check_that_hangs(tmp_path, fork):
    _, fragment = traced(lambda x: x.cos() + 1, torch.randn(3))
    request = {"op": "check", "fragment": fragment.to_json(), "backend": {"name": "eager"}, "configs": {},
               "grad_enabled": True, "accuracy": None}
    worker = Worker(str(tmp_path / "worker.log"), fork=fork)
    try:
        first = worker.request(request, timeout=300)
        assert first.data is not None and first.data["signature"] is None
        assert worker._spare is None  # by default, no spare while no check uses a GPU: forks are cheap enough
        pid = worker.request({"op": "ping"}, timeout=60).data["pid"]
        assert worker.request({"op": "ping"}, timeout=60).data["pid"] == pid  # one process, many checks
        started = time.monotonic()
        hung = worker.request(request, timeout=0.001)  # far too short: counted as a hang, worker killed
        assert hung.hung_after == 0.001 and time.monotonic() - started < 30
        again = worker.request(request, timeout=300)
        assert again.data is not None and again.data["signature"] is None
        assert worker.request({"op": "ping"}, timeout=60).data["pid"] != pid
    finally:
        worker.close()


def test_fork_server_forks_where_a_gpu_is_present_and_cuda_is_not_initialized():
    """The fork server's answer, decided without a GPU: fork unless the warm-up initialized
    CUDA; where a GPU is present, only once a forked test child has used CUDA."""
    from dynscope.minifier.worker import _can_fork_workers
    from dynscope.runner.fork_server import fork_readiness

    asked = []

    def child_ok() -> bool:
        asked.append(True)
        return True

    def never() -> bool:
        raise AssertionError("no test child without a GPU")

    ready, why = fork_readiness(cuda_initialized=False, gpu=True, child_can_use_cuda=child_ok)
    assert ready and asked and why == "forking (each child creates its own CUDA context)"
    assert not fork_readiness(cuda_initialized=False, gpu=True, child_can_use_cuda=lambda: False)[0]
    assert not fork_readiness(cuda_initialized=True, gpu=True, child_can_use_cuda=child_ok)[0]
    assert not fork_readiness(cuda_initialized=True, gpu=False, child_can_use_cuda=never)[0]
    assert fork_readiness(cuda_initialized=False, gpu=False, child_can_use_cuda=never) == (True, "forking")
    assert _can_fork_workers()  # Linux: a GPU no longer rules the fork server out


# torch says a GPU is present; creating a CUDA context (torch.cuda._lazy_init) is recorded and refused.
_PRETEND_GPU = """
import json, sys
import torch
calls = []
def refuse(*args, **kwargs):
    calls.append("cuda init")
    raise RuntimeError("the fork server must not initialize CUDA")
torch.cuda._lazy_init = torch.cuda.init = refuse
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
from dynscope.runner import fork_server
from dynscope.probes import compat
compat.inductor_compile = lambda *args: calls.append("compile")
fork_server._cuda_works_in_a_child = lambda: calls.append("test child") or True
state = fork_server.prepare_server(["dynscope.minifier.worker_main"])
print(json.dumps({**state, "calls": calls, "initialized": torch.cuda.is_initialized(),
                  "imported": "torch._inductor.compile_fx" in sys.modules}))
"""


def test_fork_server_warm_up_creates_no_cuda_context_where_a_gpu_is_present():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _PRETEND_GPU], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == {"ready": True, "why": "forking (each child creates its own CUDA context)", "gpu": True,
                     "calls": ["test child"], "initialized": False, "imported": True}


def test_a_gpu_error_means_a_new_worker():
    from dynscope.minifier.signature import poisons_device

    assert poisons_device(from_exception(RuntimeError(
        "CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported"), "runtime_error"))
    assert poisons_device(Signature("runtime_error", "AcceleratorError", "x", "x"))
    assert poisons_device(from_exception(RuntimeError("Triton Error [CUDA]: an illegal memory access"),
                                         "runtime_error"))
    assert not poisons_device(from_exception(RuntimeError("shape mismatch"), "runtime_error"))
    assert not poisons_device(None)


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "fresh-process"])
def test_a_spare_worker_takes_over_when_a_check_ends_its_worker(tmp_path, fork):
    # By default only once checks use CUDA; here forced, to test the hand-over on CPU.
    _, fragment = traced(lambda x: x.sin() * 2, torch.randn(3))
    request = {"op": "check", "fragment": fragment.to_json(), "backend": {"name": "eager"}, "configs": {},
               "grad_enabled": True, "accuracy": None}
    worker = Worker(str(tmp_path / "worker.log"), fork=fork, spare=True)
    try:
        first = worker.request(request, timeout=300)
        assert first.data is not None and first.data["signature"] is None and first.data["cuda"] is False
        pid = worker.request({"op": "ping"}, timeout=60).data["pid"]
        spare = worker._spare.pid
        assert spare != pid
        assert worker.request(request, timeout=0.001).hung_after == 0.001  # ends the worker
        assert worker.request({"op": "ping"}, timeout=60).data["pid"] == spare  # the spare took over
        assert worker._spare is not None and worker._spare.pid not in (pid, spare)  # and has a successor
        again = worker.request(request, timeout=300)
        assert again.data is not None and again.data["signature"] is None
        assert worker.started == 2
    finally:
        worker.close()
    # Without spare=True there is none: test_worker_is_reused_and_survives_a_check_that_hangs.


def test_a_gpu_fault_is_one_failure_wherever_it_surfaces():
    # Reported asynchronously: at a later kernel launch (Triton's or Inductor's launcher) or at
    # a synchronization (torch), depending on timing and on the kernels after the faulty one.
    class AcceleratorError(RuntimeError):
        pass

    surfaced = [
        AcceleratorError("CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously "
                         "reported at some other API call, so the stacktrace below might be incorrect."),
        RuntimeError("Triton Error [CUDA]: device-side assert triggered"),
        RuntimeError("CUDA driver error: device-side assert triggered"),
    ]
    first, *others = [from_exception(e, "runtime_error") for e in surfaced]
    assert all(first.same_as(other) for other in others)
    assert (first.exc_type, first.key) == ("GPU fault", "device-side assert triggered")
    assert "CUDA error: device-side assert triggered" in first.describe()
    illegal = from_exception(RuntimeError("CUDA error: an illegal memory access was encountered"), "runtime_error")
    assert not illegal.same_as(first)
