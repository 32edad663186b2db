"""What torch.compile's modes decided: max-autotune's choices and reduce-overhead's CUDA-graph
skips, as typed records (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from dynscope.events import AutotuneChoices, log_tap_kind
from dynscope.store.reader import CaptureReader

AUTOTUNE_EVENT = AutotuneChoices.KIND
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


def read_autotuning(reader: CaptureReader) -> list[AutotuneResult]:
    out = []
    for event in reader.events([AUTOTUNE_EVENT]):
        raw = reader.json_payload(event.payload_hash)
        if not isinstance(raw, dict):
            continue
        choices = tuple(AutotuneChoice(str(c.get("name")), str(c.get("description") or ""),
                                       c.get("ms") if isinstance(c.get("ms"), (int, float)) else None)
                        for c in raw.get("choices") or () if isinstance(c, dict))
        out.append(AutotuneResult(event.compile_id, str(raw.get("op")), choices, raw.get("picked"),
                                  int(event.metadata.get("choices_total") or len(choices))))
    return out


def read_cudagraph_skips(reader: CaptureReader, compile_reasons: dict[str, str]) -> list[CudagraphSkip]:
    """Skips torch logged, plus those only in a compile's metrics; each (compile, reason) once."""
    seen: dict[tuple[str | None, str], CudagraphSkip] = {}
    for cid, reason in compile_reasons.items():
        seen.setdefault((cid, reason), CudagraphSkip(cid, reason))
    for event in reader.events([CUDAGRAPH_LOG_EVENT]):
        text = (reader.payload(event.payload_hash) or "").strip()
        if "skipping cudagraphs" in text or "skipping cudagraph" in text:
            seen.setdefault((event.compile_id, text), CudagraphSkip(event.compile_id, text))
    return list(seen.values())
