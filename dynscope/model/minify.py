"""Results of ``dynscope minify`` recorded in a capture (event ``dynscope:minify_result``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MINIFY_EVENT = "dynscope:minify_result"


@dataclass(frozen=True)
class MinifyResult:
    compile_id: str | None
    kind: str | None  # compile_error | runtime_error | accuracy | crash | hang
    signature: str | None  # how it fails, in words
    culprit_stage: str | None  # dynamo | aot_autograd | inductor | backend | user
    culprit_backend: str | None  # the first backend of eager -> aot_eager -> ... -> inductor that fails
    culprit: str | None  # the culprit in words, subsystem and op included
    passed_backends: tuple[str, ...]
    subsystem: str | None  # e.g. "lowerings", "post_grad_passes", "decomposition"
    op: str | None  # e.g. "aten.relu.default"
    repro: str | None  # path of repro.py
    verified: bool  # the repro failed the same way in a fresh process
    verify: str | None
    checks_run: int
    nodes_before: int | None
    nodes_after: int | None
    wall_s: float | None
    backend: str | None  # the backend the program used
    reproduced: bool  # the graph failed outside the program (False: only the traceback names the layer)
    notes: tuple[str, ...]
    ts: float

    @property
    def headline(self) -> str:
        """One line: what failed, where, and whether there is a proven repro."""
        where = f"compile {self.compile_id}" if self.compile_id else "a graph"
        found = f"culprit: {self.culprit}" if self.culprit else "culprit not found"
        repro = f"verified repro: {self.repro}" if self.verified and self.repro else "no verified repro"
        return f"{where} · {self.signature or self.kind or 'failure'} · {found} · {repro}"


def minify_result(md: dict[str, Any], ts: float) -> MinifyResult:
    """The result as ``dynscope minify`` recorded it (the metadata of its event)."""
    return MinifyResult(
        compile_id=md.get("compile_id"),
        kind=md.get("kind"),
        signature=md.get("signature"),
        culprit_stage=md.get("culprit_stage"),
        culprit_backend=md.get("culprit_backend"),
        culprit=md.get("culprit"),
        passed_backends=tuple(md.get("passed_backends") or ()),
        subsystem=md.get("subsystem"),
        op=md.get("op"),
        repro=md.get("repro"),
        verified=bool(md.get("verified")),
        verify=md.get("verify"),
        checks_run=int(md.get("checks_run") or 0),
        nodes_before=md.get("nodes_before"),
        nodes_after=md.get("nodes_after"),
        wall_s=md.get("wall_s"),
        backend=md.get("backend"),
        reproduced=bool(md.get("reproduced", True)),
        notes=tuple(md.get("notes") or ()),
        ts=ts,
    )
