"""Captures checked by `dynscope numerics`, written through the real writer and the event contract
(``NumericsChecked``), for the views' tests without torch.

- ``relu_bug``: a forward graph of 12 nodes; node 5 (a relu, kernel ``cpp_fused_relu_0``, source
  line 17 of the relu example, SOURCE_FILE) is the first suspect and the error grows after it; node 9's
  kernel name is hostile text (markup, a control character) so escaping is tested too.
- ``within``: the same graph, every node within eager's own error (a bf16 program).
- ``nondeterministic``: one node (a scatter_add) changes from one compiled run to the next.
"""

from __future__ import annotations

from pathlib import Path

from fake_capture import FakeCapture

from dynscope import events

# The relu example of `dynscope numerics` (named as the capture names it; the file is not needed here).
SOURCE_FILE = "/".join(("examples", "numerics_relu_bug.py"))
SUSPECT_KERNEL = "cpp_fused_relu_0"
HOSTILE_KERNEL = "cpp_<script>alert(1)</script>_\x1b[31mred"

# (node, op, kernel, source line) of the 12 forward nodes, in node order
FORWARD = (
    ("mm", "aten.mm.default", "extern_kernels.mm", 14),
    ("add", "aten.add.Tensor", "cpp_fused_add_0", 14),
    ("mul", "aten.mul.Tensor", "cpp_fused_add_0", 15),
    ("sum_1", "aten.sum.dim_IntList", "cpp_fused_sum_0", 15),
    ("sub", "aten.sub.Tensor", "cpp_fused_sub_0", 16),
    ("relu", "aten.relu.default", SUSPECT_KERNEL, 17),
    ("mul_1", "aten.mul.Tensor", "cpp_fused_mul_1", 18),
    ("add_1", "aten.add.Tensor", "cpp_fused_mul_1", 18),
    ("mm_1", "aten.mm.default", "extern_kernels.mm", 19),
    ("tanh", "aten.tanh.default", HOSTILE_KERNEL, 20),
    ("add_2", "aten.add.Tensor", "cpp_fused_add_2", 21),
    ("sum_2", "aten.sum.default", "cpp_fused_add_2", 22),
)

RELU_KERNEL_CODE = '''extern "C" void kernel(const float* in_ptr0, float* out_ptr0)
{
    for (long x0 = 0; x0 < 64L; x0 += 1L)
    {
        auto tmp0 = in_ptr0[x0];
        auto tmp1 = std::max(tmp0, decltype(tmp0)(0)) + 1; // the injected bug
        out_ptr0[x0] = tmp1;
    }
}'''

OUTPUT_CODE = f"""# AOT ID: ['0_forward']
from torch._inductor.async_compile import AsyncCompile
async_compile = AsyncCompile()

# Topologically Sorted Source Nodes: [relu]
# Source node to ATen node mapping:
#   relu => relu
{SUSPECT_KERNEL} = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
{RELU_KERNEL_CODE}
''')

def call(args):
    primals_1, = args
    buf0 = empty_strided_cpu((64, ), (1, ), torch.float32)
    {SUSPECT_KERNEL}(primals_1, buf0)
    return (buf0, )
"""


def _stack(line: int) -> tuple[events.BreakFrame, ...]:
    return (events.BreakFrame(SOURCE_FILE, 30, "<module>", "y = model(x)"),
            events.BreakFrame(SOURCE_FILE, line, "forward", f"line {line} of forward"))


def _nodes(errors: list[tuple[float, float]], *, suspects: frozenset[int] | set[int] = frozenset(),
           nondeterministic: frozenset[int] | set[int] = frozenset()) -> tuple[events.NumericsNode, ...]:
    return tuple(
        events.NumericsNode(graph="0/0", direction="forward", index=i, node=node, op=op, eager_error=eager,
                            compiled_error=compiled, kernel=kernel, source=f"{SOURCE_FILE}:{line}", stack=_stack(line),
                            nondeterministic=i in nondeterministic, suspect=i in suspects)
        for i, ((node, op, kernel, line), (eager, compiled)) in enumerate(zip(FORWARD, errors)))


def _write(path: Path, checked: events.NumericsChecked) -> Path:
    fake = FakeCapture(path)
    fake.compile("0/0", "forward", line=12).output_code("0/0", OUTPUT_CODE)
    events.write(fake.writer, checked)
    return fake.close()


CRITERION = ("a node is suspect when its compiled error exceeds 10 × eager's own error + 1e-05 "
             "(errors: max abs difference against a float64 reference)")


def relu_bug(path: Path) -> Path:
    eager = [1e-7] * 12
    # rounding noise before the relu; the bug's error at the relu (a 10^7 jump), and growing after it
    compiled = [1.2e-7, 1.1e-7, 2e-7, 3e-7, 1.5e-7, 1.0, 1.0, 2.0, 40.0, 0.9, 1.0, 120.0]
    suspects = {5, 6, 7, 8, 10, 11}
    return _write(path, events.NumericsChecked(
        verdict="suspect", criterion=CRITERION, factor=10.0, tolerance=1e-5, reference_dtype="float64",
        program_dtype="float32", graphs_checked=1, first_suspect=5,
        nodes=_nodes(list(zip(eager, compiled)), suspects=suspects), elapsed_s=1.5))


def within(path: Path) -> Path:
    eager = [3e-3, 4e-3, 4e-3, 8e-3, 5e-3, 5e-3, 6e-3, 6e-3, 9e-3, 4e-3, 5e-3, 2e-2]
    compiled = [e * 0.8 for e in eager]
    return _write(path, events.NumericsChecked(
        verdict="within", criterion=CRITERION, factor=10.0, tolerance=1e-5, reference_dtype="float32",
        program_dtype="bfloat16", graphs_checked=1, first_suspect=None,
        nodes=_nodes(list(zip(eager, compiled))), elapsed_s=1.0))


def nondeterministic(path: Path) -> Path:
    eager = [1e-7] * 12
    compiled = [1e-7] * 12
    compiled[3] = 5e-6  # the scatter's sums add up in another order on every run
    nodes = list(_nodes(list(zip(eager, compiled)), nondeterministic={3}))
    nodes[3] = events.NumericsNode(**{**nodes[3].__dict__, "node": "scatter_add", "op": "aten.scatter_add.default"})
    return _write(path, events.NumericsChecked(
        verdict="nondeterministic", criterion=CRITERION, factor=10.0, tolerance=1e-5, reference_dtype="float64",
        program_dtype="float32", graphs_checked=1, first_suspect=None, nodes=tuple(nodes), elapsed_s=1.0))
