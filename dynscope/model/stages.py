"""The compile pipeline, in order, and which capture events hold each stage.

Stage names are the same on every torch version and device. They are ordered as the
graph flows through torch:

    bytecode -> dynamo -> pre_grad -> aot_joint -> aot_forward / aot_backward (or aot_inference)
    -> post_grad -> scheduler_ir -> output_code -> kernel:<name>

(Inductor's pre-grad passes run on the Dynamo graph before AOTAutograd traces it, so
pre_grad comes before the AOT stages even though it belongs to Inductor.) Inductor stages
exist once per graph it compiles; the backward graph's get a ``.backward`` suffix in their
key (``post_grad.backward``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from dynscope.events import FxGraphStructure, log_tap_kind
from dynscope.store.reader import Event

CANONICAL_STAGES = (
    "bytecode",
    "dynamo",
    "pre_grad",
    "aot_joint",
    "aot_forward",
    "aot_backward",
    "aot_inference",
    "post_grad",
    "scheduler_ir",
    "output_code",
)

# Stages Inductor produces once per graph (forward, backward or inference).
PER_GRAPH_STAGES = ("post_grad", "scheduler_ir", "output_code")

STAGE_LANGUAGE = {
    "bytecode": "bytecode",
    "dynamo": "fx",
    "aot_joint": "fx",
    "aot_forward": "fx",
    "aot_backward": "fx",
    "aot_inference": "fx",
    "pre_grad": "fx",
    "post_grad": "fx",
    "scheduler_ir": "text",
    "output_code": "python",
}

# The Pygments lexer for each language above (and a kernel's: cpp, triton, extern).
_LEXERS = {"fx": "python", "python": "python", "triton": "python", "cpp": "cpp", "bytecode": "text", "extern": "python"}


def lexer_for(language: str) -> str:
    """The Pygments lexer name that highlights a stage's language (every view that shows code uses it)."""
    return _LEXERS.get(language, "text")

STAGE_TITLES = {
    "bytecode": "Python bytecode (original, then as Dynamo rewrote it)",
    "dynamo": "Dynamo FX graph (torch IR)",
    "aot_joint": "AOTAutograd joint forward+backward graph",
    "aot_forward": "AOTAutograd forward graph (aten, partitioned)",
    "aot_backward": "AOTAutograd backward graph (aten, partitioned)",
    "aot_inference": "AOTAutograd inference graph (aten)",
    "pre_grad": "Inductor pre-grad graph",
    "post_grad": "Inductor post-grad graph (after decompositions and passes)",
    "scheduler_ir": "Inductor scheduler IR (before / after fusion)",
    "output_code": "Inductor output code",
}

# Events holding a graph-independent stage: event name -> (stage, variant). The first
# variant listed for a stage is the one shown by default.
SINGLE_STAGE_EVENTS = {
    "dynamo_output_graph": ("dynamo", "graph"),
    "aot_joint_graph": ("aot_joint", "graph"),
    "aot_forward_graph": ("aot_forward", "graph"),
    "aot_backward_graph": ("aot_backward", "graph"),
    "aot_inference_graph": ("aot_inference", "graph"),
    "artifact:after_pre_grad_graph": ("pre_grad", "after"),
    "artifact:before_pre_grad_graph": ("pre_grad", "before"),
}

# Events Inductor emits while compiling one graph, in the order it emits them.
PER_GRAPH_EVENTS = {
    "artifact:inductor_post_grad_graph": ("post_grad", "after"),
    "inductor_post_grad_graph": ("post_grad", "after"),  # replayed from the FX graph cache on a hit
    "artifact:before_post_grad_graph": ("post_grad", "before"),
    log_tap_kind("ir_post_fusion"): ("scheduler_ir", "after"),
    log_tap_kind("ir_pre_fusion"): ("scheduler_ir", "before"),
    "inductor_output_code": ("output_code", "code"),
}

# Events that open a new Inductor graph section (each graph starts with one of these).
SECTION_START_EVENTS = ("artifact:before_post_grad_graph", "artifact:fx_graph_runnable")

STAGE_EVENT_NAMES = (
    tuple(SINGLE_STAGE_EVENTS)
    + tuple(PER_GRAPH_EVENTS)
    + SECTION_START_EVENTS
    + (
        log_tap_kind("bytecode"),
        FxGraphStructure.KIND,
        "artifact:inductor_provenance_tracking_node_mappings",
        "artifact:inductor_provenance_tracking_kernel_stack_traces",
        "artifact:triton_kernel_info",
        "artifact:fx_graph_cache_hit",
        "artifact:aotautograd_cache_hit",
    )
)


@dataclass
class GraphSection:
    """The events of one graph Inductor compiled (forward, backward or inference)."""

    role: str | None
    events: list[Event]


# Where each stage's input comes from, nearest first (the first recorded one is used).
_PARENTS = {
    "bytecode": (),
    "dynamo": ("bytecode",),
    "pre_grad": ("dynamo",),
    "aot_joint": ("pre_grad", "dynamo"),
    "aot_forward": ("aot_joint", "pre_grad", "dynamo"),
    "aot_backward": ("aot_joint", "aot_forward"),
    "aot_inference": ("pre_grad", "dynamo"),
}
_GRAPH_SOURCE = {"forward": "aot_forward", "backward": "aot_backward", "inference": "aot_inference"}


def parent_keys(name: str, graph: str | None) -> tuple[str, ...]:
    """Keys of the stages a stage is computed from, nearest first."""
    if name in _PARENTS:
        return _PARENTS[name]
    aot = _GRAPH_SOURCE.get(graph or "", "aot_forward")
    chain = {
        "post_grad": (aot, "pre_grad", "dynamo"),
        "scheduler_ir": (stage_key("post_grad", graph), aot),
        "output_code": (stage_key("scheduler_ir", graph), stage_key("post_grad", graph), aot),
        "kernel": (stage_key("output_code", graph),),
    }
    return chain.get(name, ())


def stage_key(name: str, graph: str | None) -> str:
    return f"{name}.backward" if graph == "backward" and name in PER_GRAPH_STAGES else name


def split_graph_sections(
    events: Sequence[Event], has_inference: bool, explicit_role: Callable[[list[Event]], str | None]
) -> list[GraphSection]:
    """Group a compile's Inductor events by the graph they belong to.

    Inductor compiles the forward graph, then (possibly much later, on the first backward)
    the backward one; each graph's events start with fx_graph_runnable or
    before_post_grad_graph. ``explicit_role`` reads the role from a section (the output
    code's "# AOT ID" header); when it can't, order decides.
    """
    groups: list[list[Event]] = []
    for event in events:
        opens_graph = event.name in SECTION_START_EVENTS and groups and any(
            e.name in PER_GRAPH_EVENTS for e in groups[-1]
        )
        if not groups or opens_graph:
            groups.append([])
        groups[-1].append(event)
    by_order = ["inference"] if has_inference else ["forward", "backward"]
    sections = []
    for i, group in enumerate(groups):
        role = explicit_role(group) or (by_order[i] if i < len(by_order) else f"graph{i}")
        sections.append(GraphSection(role, group))
    return sections


_TRAINING_STAGES = ("aot_joint", "aot_forward", "aot_backward")


def pipeline_slots(recorded: Collection[str], roles: Sequence[str | None]) -> list[tuple[str, str | None]]:
    """(stage name, graph) of every stage a compile's pipeline shows, in order, given the keys of
    its recorded stages and the roles of the graphs Inductor compiled (in the order it did).

    A compile is traced for training (joint, forward, backward) or for inference, never both: the
    other kind's stages are left out. Per-graph stages are listed per graph only once Inductor
    compiled one; otherwise a single row says why none exists."""
    has_inference = "aot_inference" in recorded
    has_training = any(k in recorded for k in _TRAINING_STAGES)
    graphs: list[str | None] = [r for r in roles if r] or [None]
    if roles and has_training and "backward" not in graphs:
        graphs.append("backward")
    slots: list[tuple[str, str | None]] = []
    for name in CANONICAL_STAGES:
        if (name == "aot_inference" and has_training) or (name in _TRAINING_STAGES and has_inference):
            continue
        slots += [(name, graph) for graph in (graphs if name in PER_GRAPH_STAGES else [None])]
    return slots
