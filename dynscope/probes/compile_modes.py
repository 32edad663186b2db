"""What torch.compile's modes decided, recorded with the compile that decided it:

* ``mode="max-autotune"``: every autotuned op's choices with their benchmarked times and
  the one Inductor picked (the selection cache's feedback savers receive them);
* ``mode="reduce-overhead"``: every CUDA-graph skip reason (``cudagraph_skip_reason`` in
  torch's compilation metrics covers compile-time skips; torch logs the others, and the
  cudagraphs artifact log is tapped by ``log_taps``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from dynscope.events import AutotuneSeen
from dynscope.probes import compat
from dynscope.probes.sink import Sink

_MAX_CHOICES = 20


def watch_autotuning(sink: Sink) -> Callable[[], None] | None:
    """Record each autotuning result; returns the undo, or None when this torch has no hook."""

    def saver(timings: dict[Any, float], name: str, *_: Any) -> None:
        try:
            ranked = sorted(timings.items(), key=lambda kv: kv[1] if math.isfinite(kv[1]) else math.inf)
            choices = [{"name": str(getattr(c, "name", c)), "description": str(getattr(c, "description", "") or ""),
                        "ms": t if math.isfinite(t) else None} for c, t in ranked[:_MAX_CHOICES]]
            compile_id, attempt = compat.current_compile_id()
            sink.append_json(AutotuneSeen.KIND, AutotuneSeen(op=str(name), choices_total=len(timings)).to_metadata(),
                             {"op": str(name), "choices": choices, "picked": choices[0]["name"] if choices else None},
                             compile_id=compile_id, attempt=attempt)
        except Exception as e:  # never let a probe break the compile
            sink.note_error(f"autotune probe: {type(e).__name__}: {e}")

    return compat.add_autotune_feedback(saver, lambda why: sink.note_error(f"autotune probe: {why}"))
