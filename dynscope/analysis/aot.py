"""What AOTAutograd decided for a training graph."""

from __future__ import annotations

from dynscope.model import Capture, FxNode


def saved_for_backward(capture: Capture, compile_id: str) -> list[FxNode]:
    """The tensors the forward graph saves for the backward graph (its extra outputs),
    as the backward graph receives them (inputs that are not incoming gradients)."""
    stages = {s.key: s for s in capture.stages(compile_id) if s.recorded}
    if "aot_backward" not in stages or "aot_forward" not in stages:
        return []
    backward = capture.fx_graph(stages["aot_backward"])
    forward = capture.fx_graph(stages["aot_forward"])
    if backward is None or forward is None:
        return []
    produced = {n.name for n in forward.nodes}
    return [n for n in backward.nodes
            if n.op == "placeholder" and not n.name.startswith("tangents_") and n.name in produced]
