"""``minify --from CAPTURE --suspect``: start from the first numerics suspect instead of the whole graph.

``dynscope numerics`` recorded where compiled and eager part ways (a post-grad node, its kernel and
source line). The minifier rebuilds the compile's *Dynamo* graph from the capture, so the suspect is
placed there: among the rebuilt graph's own compute nodes, the one its kernel was made from (the
kernel's origin nodes), else the node of the same name, else the node at the suspect's source line
(preferring one computing the same op). The case then starts from the subgraph that ends at that
node: its ancestors only, with the node as the one output. A name read from the capture only
selects among the rebuilt graph's nodes; nothing from the capture is executed. No torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dynscope.errors import DynscopeError
from dynscope.minifier.fragment import COMPUTE_OPS, Fragment, keep_only
from dynscope.model.output_code import parse_stack_text

# Overload names that end an op's qualified name ("aten.relu.default") and say nothing of what it computes.
_OVERLOADS = frozenset({"default", "Tensor", "Scalar", "self", "int", "out", "dim_IntList", "dim", "float", "p"})


@dataclass(frozen=True)
class Suspect:
    """The first suspect of a capture's numerics check, and what places it in the Dynamo graph."""

    compile_id: str
    direction: str  # "forward" | "backward"
    node: str  # the post-grad node's name
    op: str
    kernel: str
    file: str | None
    line: int | None
    origins: tuple[str, ...]  # Dynamo-graph nodes its kernel was made from (the kernel's provenance)


def first_suspect(path: str) -> Suspect:
    """The capture's first numerics suspect; one-line errors when there is none."""
    from dynscope.analysis.run_view import run_view
    from dynscope.model import Capture

    with Capture.open(path) as capture:
        numerics = run_view(capture).numerics
        if numerics is None:
            raise DynscopeError(f"{path} has no numerics check: run `dynscope numerics --from {path}` first "
                                "(or minify a compile with --compile ID)")
        first, problem = numerics.first_suspect, numerics.problem
        if first is None or problem is None:
            raise DynscopeError(f"{path}: the numerics check found no suspect node (verdict: {numerics.verdict}); "
                                "nothing to start from")
        backward = first.direction == "backward"
        origins: tuple[str, ...] = ()
        if first.kernel:
            try:
                kernels = capture.kernels(first.graph)
            except DynscopeError:
                kernels = []
            match = [k for k in kernels if k.name == first.kernel]
            kernel = next((k for k in match if (k.graph == "backward") == backward), match[0] if match else None)
            origins = kernel.origin_nodes if kernel is not None else ()
        return Suspect(first.graph, first.direction, first.node, first.op, first.kernel, problem.file, problem.line,
                       origins)


def op_word(target: str) -> str:
    """What an op computes, in one word: "aten.relu.default", "torch.relu", "torch.nn.functional.relu",
    the method "relu_" -> "relu"."""
    parts = [p for p in target.split(".") if p]
    while len(parts) > 1 and parts[-1] in _OVERLOADS:
        parts.pop()
    return (parts[-1] if parts else target).rstrip("_").lower()


def end_node(fragment: Fragment, suspect: Suspect) -> str:
    """The rebuilt graph's compute node the suspect is placed at (see the module's docstring)."""
    compute = [n for n in fragment.nodes if n["op"] in COMPUTE_OPS]
    word = op_word(suspect.op)

    def pick(found: Sequence[dict[str, Any]]) -> str | None:
        same_op = [n for n in found if op_word(str(n["target"])) == word]
        chosen = same_op or list(found)
        return str(chosen[-1]["name"]) if chosen else None  # the last: a fused kernel's result is its last node

    origins = set(suspect.origins)
    by_origin = pick([n for n in compute if n["name"] in origins])
    if by_origin is not None:
        return by_origin
    named = [n for n in compute if n["name"] == suspect.node and op_word(str(n["target"])) == word]
    if named:
        return str(named[0]["name"])
    if suspect.line is not None:
        at_line = [n for n in compute if _line_of(n) == (_base(suspect.file), suspect.line)]
        by_line = pick(at_line)
        if by_line is not None:
            return by_line
    raise DynscopeError(f"the first suspect {suspect.node} ({suspect.op}) cannot be placed in compile "
                        f"{suspect.compile_id}'s Dynamo graph (no node from its kernel, of its name or at its source "
                        "line): minify the whole compile with --compile ID instead of --suspect")


def subgraph_ending_at(fragment: Fragment, name: str) -> Fragment:
    """The subgraph of ``name`` and the compute nodes it depends on (its ancestors only), with ``name``
    as its one output; the inputs it reads stay the graph's inputs."""
    by_name = {n["name"]: n for n in fragment.nodes}
    if name not in by_name or by_name[name]["op"] not in COMPUTE_OPS:
        raise DynscopeError(f"{name} is not a compute node of the rebuilt graph")
    keep: set[str] = set()
    frontier = [name]
    while frontier:
        current = frontier.pop()
        if current in keep or current not in by_name or by_name[current]["op"] not in COMPUTE_OPS:
            continue
        keep.add(current)
        frontier.extend(by_name[current].get("inputs", ()))
    cut = keep_only(fragment, keep, [name])
    if cut is None:  # keep_only refuses only values it cannot make inputs of; ancestors need none
        raise DynscopeError(f"the subgraph ending at {name} cannot be cut from the rebuilt graph")
    return cut


def _line_of(node: dict[str, Any]) -> tuple[str, int | None] | None:
    trace = node.get("stack_trace")
    frames = parse_stack_text(trace) if isinstance(trace, str) else []
    return (_base(frames[-1].file), frames[-1].line) if frames else None


def _base(path: str | None) -> str:
    return (path or "").replace("\\", "/").rsplit("/", 1)[-1]
