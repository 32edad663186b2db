"""On an NVIDIA GPU: the capture holds Triton output code, kernels and their provenance.

Skipped without CUDA. Run on the GPU machine (torch 2.11 + Triton there).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with Triton")

from conftest import EXAMPLES, run_dynscope  # noqa: E402

from dynscope.analysis.diff import diff_stages  # noqa: E402
from dynscope.model import Capture  # noqa: E402

CONV_NET = (EXAMPLES / "conv_net.py").read_text().splitlines()


def line_of(fragment: str) -> int:
    return next(i for i, line in enumerate(CONV_NET, 1) if fragment in line)


@pytest.fixture(scope="module")
def conv_gpu(make_capture) -> Capture:
    return Capture.open(str(make_capture("conv_net.py", "--backend", "inductor")))


def test_capture_holds_triton_output_code_and_kernels(conv_gpu):
    run = conv_gpu.run
    assert run.device["cuda"] and run.device["triton"]
    code = conv_gpu.stage_text(conv_gpu.stage("0/0", "output_code"))
    assert "async_compile.triton(" in code and "@triton.jit" in code
    triton = [k for k in conv_gpu.kernels("0/0") if k.language == "triton"]
    assert triton, "no Triton kernels found"
    assert all("@triton.jit" in k.source and k.launch and ".run(" in k.launch for k in triton)
    assert any(k.compile_time_s for k in triton)  # from torch's triton_kernel_info
    backward = [k for k in triton if k.graph == "backward"]
    assert backward and all(k.key.endswith(".backward") for k in backward)
    print("\nTriton kernels:", json.dumps([
        {"key": k.key, "post_grad_nodes": len(k.post_grad_nodes), "origins": list(k.origin_nodes),
         "lines": [f.line for f in k.source_lines], "provenance": k.provenance, "compile_s": k.compile_time_s}
        for k in triton], indent=1))


def test_gelu_maps_to_the_triton_kernel_that_computes_it_and_back_to_its_line(conv_gpu):
    gelu_line = line_of("F.gelu(")
    step = diff_stages(conv_gpu, conv_gpu.stage("0/0", "dynamo"), conv_gpu.stage("0/0", "post_grad"))
    gelu = next(n for n in conv_gpu.fx_graph(conv_gpu.stage("0/0", "dynamo")).nodes if n.op_kind == "gelu")
    erf = next(n for n in step.decomposed[gelu.name] if n.startswith("erf"))
    (kernel_name,) = step.fused_into[erf]
    kernel = next(k for k in conv_gpu.kernels("0/0") if k.name == kernel_name)
    assert kernel.language == "triton"
    assert any(f.line == gelu_line for f in kernel.source_lines)


def test_the_assert_is_an_assert_async_kernel_on_gpu(conv_gpu):
    kernel = next(k for k in conv_gpu.kernels("0/0") if "_assert_async" in k.name or "_assert_async" in k.post_grad_nodes)
    assert any(f.line == line_of("assert torch.all") for f in kernel.source_lines)


def test_stages_and_summary_on_gpu(conv_gpu):
    names = conv_gpu.recorded_stage_names("0/0")
    for stage in ("bytecode", "dynamo", "aot_forward", "aot_backward", "post_grad", "output_code"):
        assert stage in names
    result = run_dynscope("summary", conv_gpu.path, "--json")
    assert result.returncode == 0
    assert "output_code" in json.loads(result.stdout)["compiles"][0]["stages"]
    print("\nstages:", [(s.key, s.recorded, s.missing_reason) for s in conv_gpu.stages("0/0")])
