"""Kernel records of one Inductor graph: its output code split into kernels, each mapped to the FX
nodes it computes and the user's source lines, by torch's provenance tracking when it recorded it,
else by the comments Inductor writes in the code."""

from __future__ import annotations

from collections.abc import Callable

from dynscope.model.fxgraph import FxGraph
from dynscope.model.json_values import JsonObject, JsonValue, as_list, as_number, as_object
from dynscope.model.output_code import parse_stack_text, split_kernels
from dynscope.model.records import Kernel, StackFrame, Stage
from dynscope.model.stages import GraphSection, stage_key
from dynscope.store.reader import CaptureReader, Event

OUTPUT_CODE = "inductor_output_code"
NODE_MAPPINGS = "artifact:inductor_provenance_tracking_node_mappings"
KERNEL_STACK_TRACES = "artifact:inductor_provenance_tracking_kernel_stack_traces"
KERNEL_INFO = "artifact:triton_kernel_info"


def read_kernels(reader: CaptureReader, compile_id: str, section: GraphSection, stages: dict[str, Stage],
                 fx_graph: Callable[[Stage], FxGraph | None]) -> list[Kernel]:
    """The kernels of one graph section; ``stages`` are the compile's recorded stages by key (the
    post-grad graph's nodes name source lines when torch's provenance does not)."""
    by_name = {e.name: e for e in section.events}
    code_event = by_name.get(OUTPUT_CODE)
    if code_event is None:
        return []
    code = reader.payload(code_event.payload_hash) or ""
    node_map = _json_object(reader, by_name.get(NODE_MAPPINGS))
    stack_map = _json_object(reader, by_name.get(KERNEL_STACK_TRACES))
    kernel_info = _json_object(reader, by_name.get(KERNEL_INFO))
    code_to_post = as_object(node_map.get("cppCodeToPost"))
    post_to_pre = as_object(node_map.get("postToPre"))
    post_grad = stages.get(stage_key("post_grad", section.role))
    post_graph = fx_graph(post_grad) if post_grad else None
    kernels = []
    for k in split_kernels(code):
        handle = _provenance_handle(k.name, list(code_to_post) + list(stack_map))
        torch_nodes = _strings(code_to_post.get(handle)) if handle else ()
        post_nodes = torch_nodes or tuple(k.post_grad_nodes)
        origins = [o for n in post_nodes for o in _strings(post_to_pre.get(n))] or list(k.origin_nodes)
        lines: list[StackFrame] = []
        if handle:
            lines = [f for text in _strings(stack_map.get(handle)) for f in parse_stack_text(text)]
        if not lines and post_graph is not None:
            lines = [frame for n in post_nodes if n in post_graph.by_name
                     and (frame := post_graph.by_name[n].user_frame) is not None]
        compile_us = as_number(as_object(kernel_info.get(k.name)).get("compile_time_us"))
        kernels.append(Kernel(
            compile_id=compile_id,
            graph=section.role,
            name=k.name,
            language=k.language,
            source=k.source,
            launch=k.launch,
            compile_time_s=compile_us / 1e6 if compile_us is not None else None,
            post_grad_nodes=post_nodes,
            origin_nodes=tuple(dict.fromkeys(origins)),
            source_lines=tuple(dict.fromkeys(lines)),
            provenance="torch" if handle else ("comments" if post_nodes or origins else None),
        ))
    return kernels


def kernel_stage(kernel: Kernel) -> Stage:
    """A kernel as the last stage of its graph's pipeline."""
    return Stage(kernel.compile_id, "kernel", kernel.graph, kernel.key, True, None, kernel.language, size=len(kernel.source))


def _provenance_handle(kernel_name: str, handles: list[str]) -> str | None:
    """Torch keys provenance by "<kernel>:<debug handle>"; repeated extern calls are "#2", "#3"."""
    base, _, nth = kernel_name.partition("#")
    matches = list(dict.fromkeys(h for h in handles if h.rsplit(":", 1)[0] == base))
    index = int(nth) - 1 if nth else 0
    return matches[index] if index < len(matches) else None


def _strings(value: JsonValue) -> tuple[str, ...]:
    """The strings of a JSON array (torch's node names, its stack texts); nothing else counts."""
    return tuple(v for v in as_list(value) if isinstance(v, str))


def _json_object(reader: CaptureReader, event: Event | None) -> JsonObject:
    if event is None:
        return {}
    try:
        value = reader.json_payload(event.payload_hash)
    except ValueError:
        return {}
    return as_object(value)
