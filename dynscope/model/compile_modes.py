"""What torch.compile's modes decided: max-autotune's choices and reduce-overhead's CUDA-graph
skips, as typed records (torch-free)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from dynscope.events import AutotuneSeen, NotUnderstood, log_tap_kind
from dynscope.model.json_values import JsonValue, as_list, as_str
from dynscope.store.reader import CaptureReader

AUTOTUNE_EVENT = AutotuneSeen.KIND
CUDAGRAPH_LOG_EVENT = log_tap_kind("cudagraphs")


@dataclass(frozen=True)
class AutotuneChoice:
    name: str
    description: str
    ms: float | None  # benchmarked time; None when the choice failed to run


@dataclass(frozen=True)
class AutotuneResult:
    compile_id: str | None
    op: str  # e.g. "mm"
    choices: tuple[AutotuneChoice, ...]  # fastest first
    picked: str | None
    choices_total: int


@dataclass(frozen=True)
class CudagraphSkip:
    compile_id: str | None  # None: torch skipped at a later call, outside any compile
    reason: str


def read_autotuning(reader: CaptureReader,
                    not_understood: Callable[[NotUnderstood, int], None] | None = None) -> list[AutotuneResult]:
    """``not_understood(error, event id)`` hears of each event not of the declared shape (skipped)."""
    out = []
    for event in reader.events([AUTOTUNE_EVENT]):
        raw = reader.json_payload(event.payload_hash)
        try:
            seen = AutotuneSeen.parse(event.metadata)
            if not isinstance(raw, dict):
                raise NotUnderstood(AUTOTUNE_EVENT, "its payload is not a JSON object")
        except NotUnderstood as e:
            if not_understood is not None:
                not_understood(e, event.id)
            continue
        choices = tuple(AutotuneChoice(str(c.get("name")), str(c.get("description") or ""), _ms(c.get("ms")))
                        for c in as_list(raw.get("choices")) if isinstance(c, dict))
        out.append(AutotuneResult(event.compile_id, str(raw.get("op")), choices, as_str(raw.get("picked")),
                                  seen.choices_total or len(choices)))
    return out


def read_cudagraph_skips(reader: CaptureReader, compile_reasons: dict[str, str],
                         compiles: list[tuple[str, str]]) -> list[CudagraphSkip]:
    """Skips torch logged, plus those only in a compile's metrics; each (compile, reason) once.

    A skip torch decides at a graph's first call is logged outside any compile; its text names
    the user function ("Found from: File ..., line 23, in mutates"): it belongs to the latest
    compile of that function."""
    seen: dict[tuple[str | None, str], CudagraphSkip] = {}
    for compile_id, reason in compile_reasons.items():
        seen.setdefault((compile_id, reason), CudagraphSkip(compile_id, reason))
    for event in reader.events([CUDAGRAPH_LOG_EVENT]):
        text = (reader.payload(event.payload_hash) or "").strip()
        if "skipping cudagraph" not in text:
            continue
        cid = event.compile_id
        if cid is None and (named := _FOUND_IN.search(text)):
            cid = next((c for c, function in reversed(compiles) if function == named["function"]), None)
        seen.setdefault((cid, text), CudagraphSkip(cid, text))
    return list(seen.values())


def _ms(value: JsonValue) -> float | None:
    """A benchmarked time as torch wrote it (an int stays an int); anything else: the choice did not run."""
    return value if isinstance(value, int | float) else None


_FOUND_IN = re.compile(r'File "[^"]*", line \d+, in (?P<function>[\w<>.]+)')
