"""What a trial run's child is told: the remedies to apply, as the payload of the child
extension ``dynscope.fix.apply`` in the run's ChildSpec (dynscope/runner/spec.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from dynscope.events import Action, action_from_json
from dynscope.runner.spec import ChildExtension

EXTENSION = "dynscope.fix.apply"  # its start_in_child applies them once the recorder runs


@dataclass(frozen=True)
class TrialRemedies:
    actions: tuple[Action, ...]  # each from the remedy table (analysis/remedies.py)

    def extension(self) -> ChildExtension:
        return ChildExtension(EXTENSION, json.dumps({"remedies": [a.to_json() for a in self.actions]}))

    @classmethod
    def from_payload(cls, payload: str) -> TrialRemedies:
        """The actions back; an action that is not one of the contract's is refused (ValueError)."""
        data = json.loads(payload)
        remedies = data.get("remedies") if isinstance(data, dict) else None
        return cls(tuple(action_from_json(a) for a in remedies or []))
