"""Draw a stage's FX graph as Graphviz DOT (and SVG, when graphviz's `dot` is installed).

Nodes are coloured by what they compute; the user's source line is part of each label;
post-grad graphs are clustered by the kernel that computes each node. Graphs too big to
read are collapsed: by module path (one box per nn.Module) or, after Inductor, by kernel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import defaultdict

from dynscope.analysis.names import first_line, short_path
from dynscope.errors import DynscopeError
from dynscope.model import Capture, FxGraph, FxNode, Stage
from dynscope.safe_text import visible

# Beyond this many compute nodes a graph is collapsed unless the caller says otherwise.
DEFAULT_MAX_NODES = 150

_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "conv2d", "convolution", "conv1d", "conv3d",
           "_scaled_dot_product_flash_attention", "scaled_dot_product_attention"}
_REDUCTION = {"sum", "mean", "amax", "amin", "max", "min", "var", "var_mean", "std", "prod", "argmax", "argmin",
              "logsumexp", "softmax", "_softmax", "log_softmax", "_log_softmax", "cumsum", "native_layer_norm",
              "layer_norm", "native_batch_norm", "_native_batch_norm_legit_functional", "batch_norm"}
_VIEW = {"view", "reshape", "permute", "transpose", "t", "expand", "squeeze", "unsqueeze", "slice", "select",
         "as_strided", "_unsafe_view", "clone", "contiguous", "alias", "getitem", "split", "cat", "stack"}

COLORS = {
    "input": "#cfe2ff",
    "output": "#e2e3e5",
    "matmul": "#ffd8a8",
    "reduction": "#e5dbff",
    "view": "#f1f3f5",
    "pointwise": "#d3f9d8",
    "other": "#ffffff",
    "module": "#fff3bf",
    "kernel": "#ffe3e3",
}


def op_category(node: FxNode) -> str:
    if node.op in ("placeholder", "get_attr"):
        return "input"
    if node.op == "output":
        return "output"
    kind = node.op_kind
    if kind in _MATMUL:
        return "matmul"
    if kind in _REDUCTION:
        return "reduction"
    if kind in _VIEW:
        return "view"
    if node.is_compute:
        return "pointwise"
    return "other"


def stage_to_dot(capture: Capture, stage: Stage, *, collapse: str | None = None,
                 max_nodes: int = DEFAULT_MAX_NODES) -> str:
    """DOT text for one FX stage. ``collapse``: None (auto), "none", "module" or "kernel"."""
    if stage.recorded and stage.language != "fx":
        raise DynscopeError(f"stage {stage.key} of compile {stage.compile_id} is {_LANGUAGE_NAMES.get(stage.language, stage.language)}, "
                            "not a graph: graphs are drawn for the FX stages (dynamo, pre_grad, aot_*, post_grad)")
    graph = capture.fx_graph(stage)
    if graph is None:
        why = stage.missing_reason if not stage.recorded else (
            "its graph structure was not recorded" + (f": {capture.run.probe_details['fx_graphs']}"
                                                      if capture.run.probe_details.get("fx_graphs") else ""))
        raise DynscopeError(f"stage {stage.key} of compile {stage.compile_id} has no FX graph to draw ({why})")
    kernels_of = _kernels_by_node(capture, stage)
    if collapse is None:
        collapse = "none" if len(graph.compute_nodes) <= max_nodes else ("kernel" if kernels_of else "module")
    if collapse == "kernel" and not kernels_of:
        raise DynscopeError(f"stage {stage.key} has no kernels to collapse by (only post-grad graphs do)")
    title = f"{stage.compile_id} {stage.key}"
    if collapse == "none":
        return _full(graph, title, kernels_of, capture.run.cwd)
    return _collapsed(graph, title, kernels_of if collapse == "kernel" else None)


_LANGUAGE_NAMES = {"bytecode": "Python bytecode", "python": "Python code", "cpp": "C++ code",
                   "triton": "Triton code", "text": "text"}
IMAGE_FORMATS = ("svg", "png", "pdf")  # what graphviz's `dot -T` draws for `dynscope graph -o`


def render_svg(dot_text: str, *, timeout_s: float = 60.0) -> str:
    """SVG from DOT, drawn by graphviz's `dot` program."""
    return render_image(dot_text, "svg", timeout_s=timeout_s).decode("utf-8")


def render_image(dot_text: str, fmt: str, *, timeout_s: float = 60.0) -> bytes:
    """An image (svg, png or pdf) from DOT, drawn by graphviz's `dot` program."""
    # Only absolute PATH entries: an empty or relative one ("PATH=:/usr/bin") names the directory
    # dynscope runs in, where a stranger's tree could hold a program called dot.
    dot = shutil.which("dot", path=os.pathsep.join(p for p in os.environ.get("PATH", os.defpath).split(os.pathsep)
                                                    if os.path.isabs(p)))
    if dot is None:
        raise DynscopeError(
            f"graphviz's `dot` program is not installed (e.g. `apt install graphviz`), so no {fmt.upper()} could be drawn"
        )
    try:
        result = subprocess.run([dot, f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True,
                                timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise DynscopeError(f"graphviz took over {timeout_s:.0f} s to draw the graph; try --collapse module") from None
    if result.returncode != 0:
        raise DynscopeError(f"graphviz failed to draw the graph: {first_line(result.stderr.decode('utf-8', 'replace'))}")
    return result.stdout


def _full(graph: FxGraph, title: str, kernels_of: dict[str, str], cwd: str | None) -> str:
    out = _header(title)
    clusters: dict[str | None, list[FxNode]] = defaultdict(list)
    for node in graph.nodes:
        clusters[kernels_of.get(node.name)].append(node)
    for kernel, nodes in clusters.items():
        indent = "  "
        if kernel is not None:
            out.append(f'  subgraph "cluster_{_esc(kernel)}" {{')
            out.append(f'    label="{_esc(kernel)}"; style="rounded,filled"; fillcolor="{COLORS["kernel"]}";')
            indent = "    "
        for node in nodes:
            out.append(f'{indent}"{_esc(node.name)}" [label="{_esc(_label(node, cwd))}", '
                       f'fillcolor="{COLORS[op_category(node)]}"];')
        if kernel is not None:
            out.append("  }")
    for node in graph.nodes:
        for source in node.inputs:
            if source in graph.by_name:
                out.append(f'  "{_esc(source)}" -> "{_esc(node.name)}";')
    out.append("}")
    return "\n".join(out)


def _collapsed(graph: FxGraph, title: str, kernels_of: dict[str, str] | None) -> str:
    """One box per group (kernel, or innermost module path); edges between groups."""

    def group(node: FxNode) -> str:
        if node.op in ("placeholder", "get_attr"):
            return "inputs"
        if node.op == "output":
            return "output"
        if kernels_of is not None:
            return kernels_of.get(node.name, "(not in a kernel)")
        return node.module_path or "(top level)"

    members: dict[str, list[FxNode]] = defaultdict(list)
    for node in graph.nodes:
        members[group(node)].append(node)
    out = _header(title + " (collapsed by " + ("kernel" if kernels_of is not None else "module") + ")")
    for name, nodes in members.items():
        kinds = sorted({n.op_kind for n in nodes if n.is_compute})
        label = f"{name}\n{len(nodes)} nodes" + (f"\n{', '.join(kinds[:6])}" if kinds else "")
        color = COLORS["input"] if name == "inputs" else COLORS["output"] if name == "output" else (
            COLORS["kernel"] if kernels_of is not None else COLORS["module"])
        out.append(f'  "{_esc(name)}" [label="{_esc(label)}", fillcolor="{color}"];')
    edges = set()
    for node in graph.nodes:
        for source in node.inputs:
            if source in graph.by_name:
                a, b = group(graph.by_name[source]), group(node)
                if a != b:
                    edges.add((a, b))
    for a, b in sorted(edges):
        out.append(f'  "{_esc(a)}" -> "{_esc(b)}";')
    out.append("}")
    return "\n".join(out)


def _header(title: str) -> list[str]:
    return [
        "digraph fx {",
        f'  label="{_esc(title)}"; labelloc="t"; rankdir="TB";',
        '  node [shape="box", style="rounded,filled", fontname="Helvetica", fontsize=10];',
        '  edge [color="#868e96"];',
    ]


def _label(node: FxNode, cwd: str | None) -> str:
    lines = [node.name]
    if node.is_compute:
        lines.append(node.op_kind)
    meta = node.tensor if isinstance(node.tensor, dict) else None
    if meta and "shape" in meta:
        shape = meta["shape"]
        dims = shape if isinstance(shape, list) else [shape]
        lines.append(f"{meta.get('dtype', '')}[{', '.join(str(d) for d in dims)}]")
    frame = node.user_frame
    if frame is not None:
        lines.append(f"{short_path(frame.file, cwd)}:{frame.line}")
    return "\n".join(lines)


def _kernels_by_node(capture: Capture, stage: Stage) -> dict[str, str]:
    if stage.name != "post_grad":
        return {}
    mapping: dict[str, str] = {}
    for kernel in capture.kernels(stage.compile_id):
        if kernel.graph == stage.graph:
            for node in kernel.post_grad_nodes:
                mapping.setdefault(node, kernel.name)
    return mapping


def _esc(text: str) -> str:
    # Control characters visible first (dynscope.safe_text), then DOT's own quoting.
    return visible(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
