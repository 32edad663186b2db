"""What a trial run's child is told: the remedies to apply, as the payload of the child
extension ``dynscope.fix.apply`` in the run's ChildSpec (dynscope/runner/spec.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dynscope.runner.spec import ChildExtension

EXTENSION = "dynscope.fix.apply"  # its start_in_child applies them once the recorder runs


@dataclass(frozen=True)
class TrialRemedies:
    actions: tuple[dict[str, Any], ...]  # each from the remedy table (analysis/remedies.py)

    def extension(self) -> ChildExtension:
        return ChildExtension(EXTENSION, json.dumps({"remedies": list(self.actions)}))

    @classmethod
    def from_payload(cls, payload: str) -> TrialRemedies:
        data = json.loads(payload)
        remedies = data.get("remedies") if isinstance(data, dict) else None
        return cls(tuple(a for a in remedies or [] if isinstance(a, dict)))
