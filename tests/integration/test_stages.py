"""How the user's code became kernels: stages, structural graphs, kernels, provenance, diffs.

Facts checked on real compiles, not snapshots of text. The inductor tests share one capture
of examples/conv_net.py (conv -> batchnorm -> gelu -> mean -> linear, one training step).
"""

from __future__ import annotations

import shutil

import pytest
from conftest import EXAMPLES, needs_program, run_dynscope

from dynscope.analysis.aot import saved_for_backward
from dynscope.analysis.diff import diff_compiles, diff_stages, previous_recorded
from dynscope.analysis.dot import render_svg, stage_to_dot
from dynscope.model import Capture

needs_dot = needs_program("dot")
CONV_NET = (EXAMPLES / "conv_net.py").read_text().splitlines()


def line_of(fragment: str) -> int:
    return next(i for i, line in enumerate(CONV_NET, 1) if fragment in line)


@pytest.fixture(scope="module")
def conv(make_capture) -> Capture:
    return Capture.open(str(make_capture("conv_net.py", "--backend", "inductor")))


# What an older torch does not record (README "Supported"), read from the capture itself: the
# tests below then check what that torch does give, and skip only what needs the missing part.
def unlogged_stages(capture: Capture) -> set[str]:
    """Stages the capture says this torch does not log (torch 2.6: pre_grad, scheduler_ir)."""
    return {s.key for s in capture.stages("0/0") if not s.recorded and "this torch" in (s.missing_reason or "")}


def needs_provenance(capture: Capture) -> None:
    if not list(capture.reader.events(["artifact:inductor_provenance_tracking_node_mappings"])):
        pytest.skip(f"torch {capture.run.torch_version} writes no kernel provenance")


@pytest.mark.inductor
def test_training_compile_records_every_stage_in_pipeline_order(conv):
    keys = [s.key for s in conv.stages("0/0") if s.recorded]
    unlogged = unlogged_stages(conv)
    assert unlogged <= {"pre_grad", "scheduler_ir", "scheduler_ir.backward"}
    expected = [k for k in ["bytecode", "dynamo", "pre_grad", "aot_joint", "aot_forward", "aot_backward", "post_grad",
                            "post_grad.backward", "scheduler_ir", "scheduler_ir.backward", "output_code",
                            "output_code.backward"] if k not in unlogged]
    assert keys[: len(expected)] == expected
    assert all(k.startswith("kernel:") for k in keys[len(expected):]) and len(keys) > len(expected)
    assert conv.recorded_stage_names("0/0") == [n for n in [
        "bytecode", "dynamo", "pre_grad", "aot_joint", "aot_forward", "aot_backward", "post_grad", "scheduler_ir",
        "output_code"] if n not in unlogged]
    if "scheduler_ir" not in unlogged:
        assert set(conv.stage("0/0", "scheduler_ir").variants) == {"before", "after"}


@pytest.mark.inductor
def test_gelu_decomposes_into_aten_ops_computed_by_a_cpp_kernel_from_the_users_line(conv):
    needs_provenance(conv)
    gelu_line = line_of("F.gelu(")
    dynamo = conv.fx_graph(conv.stage("0/0", "dynamo"))
    gelu = next(n for n in dynamo.nodes if n.op_kind == "gelu")
    assert gelu.user_frame.line == gelu_line and gelu.user_frame.file.endswith("conv_net.py")

    step = diff_stages(conv, conv.stage("0/0", "dynamo"), conv.stage("0/0", "post_grad"))
    assert step.structural and step.matched_by == "lineage"
    post_grad = conv.fx_graph(conv.stage("0/0", "post_grad"))
    decomposed = [post_grad.by_name[n].op_kind for n in step.decomposed[gelu.name]]
    assert "erf" in decomposed and "mul" in decomposed and "gelu" not in decomposed

    kernel = next(k for k in conv.kernels("0/0") if "erf" in {post_grad.by_name[n].op_kind
                                                              for n in k.post_grad_nodes if n in post_grad.by_name})
    # conv_net.py runs on the GPU when there is one: C++ kernels on CPU, Triton on CUDA.
    marker = {"cpp": 'extern "C"', "triton": "@triton.jit"}[kernel.language]
    assert marker in kernel.source and kernel.provenance == "torch"
    assert kernel.language == ("triton" if conv.run.device.get("cuda") else "cpp")
    assert gelu.name in kernel.origin_nodes
    assert any(f.line == gelu_line and f.file.endswith("conv_net.py") for f in kernel.source_lines)
    assert step.fused_into[step.decomposed[gelu.name][0]] == (kernel.name,)


@pytest.mark.inductor
def test_forward_saves_tensors_the_backward_receives(conv):
    saved = saved_for_backward(conv, "0/0")
    names = {n.name for n in saved}
    forward_outputs = conv.fx_graph(conv.stage("0/0", "aot_forward")).nodes[-1].args[0]
    returned = {a["node"] for a in forward_outputs}
    assert names and names <= returned  # each saved tensor is a forward output...
    assert "convolution" in names  # ...e.g. the conv output, needed for batchnorm's backward
    backward = conv.fx_graph(conv.stage("0/0", "aot_backward"))
    assert names <= {n.name for n in backward.nodes if n.op == "placeholder"}  # ...and a backward input


@pytest.mark.inductor
def test_the_assert_becomes_an_assert_async_node_and_kernel(conv):
    """'Why is there an _assert_async in my forward?' -> it is the user's assert, traced."""
    needs_provenance(conv)
    assert_line = line_of("assert torch.all")
    dynamo = conv.fx_graph(conv.stage("0/0", "dynamo"))
    node = next(n for n in dynamo.nodes if n.target.endswith("_assert_async"))
    assert node.user_frame.line == assert_line
    kernel = next(k for k in conv.kernels("0/0") if "_assert_async" in k.post_grad_nodes)
    assert any(f.line == assert_line for f in kernel.source_lines)


@pytest.mark.inductor
def test_extern_kernels_are_kernels_too(conv):
    kernels = {k.name: k for k in conv.kernels("0/0") if k.graph == "forward"}
    assert kernels["extern_kernels.convolution"].origin_nodes == ("conv2d",)  # from Inductor's comments
    needs_provenance(conv)
    assert kernels["extern_kernels.addmm"].source_lines[0].line == line_of("self.head(y)")


@pytest.mark.inductor
def test_every_stage_steps_from_the_one_it_came_from(conv):
    stages = conv.stages("0/0")
    parents = {s.key: (previous_recorded(stages, s).key if previous_recorded(stages, s) else None)
               for s in stages if s.recorded}
    if "pre_grad" in unlogged_stages(conv):
        assert parents["aot_joint"] == "dynamo"
    else:
        assert parents["pre_grad"] == "dynamo" and parents["aot_joint"] == "pre_grad"
    assert parents["aot_backward"] == "aot_joint" and parents["post_grad.backward"] == "aot_backward"
    assert parents["post_grad"] == "aot_forward"
    assert parents["output_code"] == ("post_grad" if "scheduler_ir" in unlogged_stages(conv) else "scheduler_ir")
    for key, parent in parents.items():
        if key.startswith("kernel:"):
            assert parent == ("output_code.backward" if key.endswith(".backward") else "output_code")


@pytest.mark.inductor
def test_graph_drawing_clusters_post_grad_nodes_by_kernel(conv, tmp_path):
    needs_provenance(conv)  # which post-grad nodes each kernel computes
    stage = conv.stage("0/0", "post_grad")
    dot = stage_to_dot(conv, stage)
    kernels = [k.name for k in conv.kernels("0/0") if k.graph == "forward" and k.language in ("cpp", "triton")]
    for name in kernels:
        assert f'subgraph "cluster_{name}"' in dot
    assert "conv_net.py:" in dot
    if shutil.which("dot"):
        assert "<svg" in render_svg(dot)
    collapsed = stage_to_dot(conv, stage, collapse="kernel")
    assert all(f'"{name}" [label=' in collapsed for name in kernels)


def test_networkx_view_of_a_stage(make_capture):
    capture = Capture.open(str(make_capture("train_loop.py", "--backend", "aot_eager")))
    graph = capture.fx_graph(capture.stage("0/0", "aot_forward"))
    nx_graph = graph.to_networkx()
    assert nx_graph.number_of_nodes() == len(graph)
    addmm = next(n for n in graph.nodes if n.op_kind == "addmm")
    assert set(nx_graph.predecessors(addmm.name)) == set(addmm.inputs)


def test_missing_stages_say_why(make_capture):
    eager = Capture.open(str(make_capture("graph_breaks.py", "--backend", "eager")))
    missing = {s.key: s.missing_reason for s in eager.stages("0/0") if not s.recorded}
    assert "backend does not use AOTAutograd" in missing["aot_joint"]
    assert "backend does not use Inductor" in missing["post_grad"]
    aot = Capture.open(str(make_capture("train_loop.py", "--backend", "aot_eager")))
    missing = {s.key: s.missing_reason for s in aot.stages("0/0") if not s.recorded}
    assert set(missing) == {"pre_grad", "post_grad", "scheduler_ir", "output_code"}
    assert all('backend="aot_eager"' in reason for reason in missing.values())


def test_recompile_diff_shows_the_changed_shape_and_guard(make_capture):
    capture = Capture.open(str(make_capture("recompiles.py", "--backend", "eager")))
    result = diff_compiles(capture, "0/0", "0/1")
    assert "size mismatch" in result.recompile_reason
    node, what, before, after = next(c for c in result.graph.changed if c[0] == "l_x_" and c[1] == "shape")
    assert before == "[4, 10]" and after.startswith("[s")  # the first dimension became dynamic
    tensor_guard = next(g for g in result.guard_changes if g.kind == "TENSOR_MATCH" and g.source == "L['x']")
    assert "size=[4, 10]" in tensor_guard.before and "size=[None, 10]" in tensor_guard.after


def test_stage_commands_end_to_end(make_capture, tmp_path):
    path = str(make_capture("train_loop.py", "--backend", "aot_eager"))
    listing = run_dynscope("stages", path, "--compile", "0/0")
    assert listing.returncode == 0
    assert listing.stdout.index("dynamo") < listing.stdout.index("aot_joint") < listing.stdout.index("aot_backward")
    assert "missing: not run: the backend does not use Inductor" in listing.stdout
    shown = run_dynscope("show", path, "--compile", "0/0", "--stage", "aot_forward", "--raw")
    assert shown.returncode == 0 and "torch.ops.aten.addmm.default" in shown.stdout
    diff = run_dynscope("diff", path, "--compile", "0/0", "--from", "dynamo", "--to", "aot_forward", "--raw")
    assert diff.returncode == 0 and "decomposed into" in diff.stdout and "+addmm" in diff.stdout.replace(" ", "")
    missing = run_dynscope("show", path, "--compile", "0/0", "--stage", "post_grad")
    assert missing.returncode == 1 and "missing" in missing.stderr and missing.stderr.count("\n") == 1
    unknown = run_dynscope("show", path, "--compile", "9/9", "--stage", "dynamo")
    assert unknown.returncode == 2 and "no compile 9/9" in unknown.stderr


@needs_dot
def test_graph_command_draws_svg(make_capture, tmp_path):
    path = str(make_capture("train_loop.py", "--backend", "aot_eager"))
    svg = tmp_path / "g.svg"
    drawn = run_dynscope("graph", path, "--compile", "0/0", "--stage", "aot_forward", "-o", str(svg))
    assert drawn.returncode == 0 and "<svg" in svg.read_text() and "addmm" in svg.read_text()


def test_graph_command_without_graphviz_leaves_the_dot_text(make_capture, tmp_path):
    path = str(make_capture("train_loop.py", "--backend", "aot_eager"))
    no_tools = tmp_path / "bin"
    no_tools.mkdir()
    drawn = run_dynscope("graph", path, "--compile", "0/0", "--stage", "aot_forward", "-o", str(tmp_path / "g.svg"),
                         env={"PATH": str(no_tools)})
    assert drawn.returncode == 1 and drawn.stderr.count("\n") == 1
    assert "`dot` program is not installed" in drawn.stderr and "g.dot" in drawn.stderr
    assert (tmp_path / "g.dot").read_text().startswith("digraph fx {")
    assert not (tmp_path / "g.svg").exists()


@pytest.mark.inductor
def test_explain_names_the_cache_hit_as_the_reason_a_stage_is_missing(tmp_path):
    # warm_start.py: one small inference graph (no backward to compile; the kernels of a fresh cache
    # directory are built by gcc in the cold run), enough for every stage the assertions name.
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache")}
    for name in ("cold", "warm"):
        result = run_dynscope("explain", "-o", str(tmp_path / f"{name}.dynscope"),  # the caches kept: the default
                              str(EXAMPLES / "warm_start.py"), env=env)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "caches were off" not in result.stderr
    cold, warm = (Capture.open(str(tmp_path / f"{n}.dynscope")) for n in ("cold", "warm"))
    unlogged = unlogged_stages(cold)
    assert all(cold.stage("0/0", k).recorded for k in ("pre_grad", "scheduler_ir") if k not in unlogged)
    missing = {s.key: s.missing_reason for s in warm.stages("0/0") if not s.recorded}
    assert all(missing[k].startswith("not run: cache hit") and "--cold" in missing[k]
               for k in ("pre_grad", "scheduler_ir") if k not in unlogged)
    assert "explain --cold records every stage" in result.stderr  # the summary names the flag once
    assert warm.stage("0/0", "output_code").recorded
    # Newer torch replays the post-grad graph from the cache; 2.6 does not, and the capture says why.
    post_grad = warm.stage("0/0", "post_grad")
    assert post_grad.recorded or "cache hit" in post_grad.missing_reason


@pytest.mark.inductor
def test_big_graphs_collapse_by_module_path(conv):
    collapsed = stage_to_dot(conv, conv.stage("0/0", "dynamo"), collapse="module")
    for module in ("L['self'].conv", "L['self'].bn", "L['self'].head"):
        assert f'"{module}" [label=' in collapsed
    assert "\"L['self'].conv\" -> \"L['self'].bn\"" in collapsed
    assert stage_to_dot(conv, conv.stage("0/0", "dynamo"), max_nodes=3).count("[label=") < len(
        conv.fx_graph(conv.stage("0/0", "dynamo")))  # auto-collapse above max_nodes
