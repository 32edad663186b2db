"""The detection run's child extension: the failure probe, in the recording child.

``dynscope minify`` runs the user's program as ``dynscope explain`` does (dynscope/runner/child.py)
with this module named as a child extension in its ChildSpec (minifier/detect.py). The program runs
exactly as under python until its first failing graph; the probe then records the failure and
stops it: the child records the original exception and exits with STOPPED_AT_FAILURE.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dynscope.runner.extensions import ChildHooks, ProgramStop
from dynscope.runner.spec import ChildExtension

if TYPE_CHECKING:
    from dynscope.recorder import Recorder

EXTENSION = "dynscope.minifier.child"
STOPPED_AT_FAILURE = 0  # exit status once the failure is recorded: the parent reads failure.json


@dataclass(frozen=True)
class DetectionOptions:
    out_dir: str  # where the probe writes the failure, the graphs and the marker
    accuracy: dict[str, float] | None  # tolerances: an accuracy failure is looked for too

    def extension(self) -> ChildExtension:
        return ChildExtension(EXTENSION, json.dumps({"out_dir": self.out_dir, "accuracy": self.accuracy}))

    @classmethod
    def from_payload(cls, payload: str) -> DetectionOptions:
        data = json.loads(payload)
        accuracy = data.get("accuracy")
        return cls(str(data["out_dir"]), {str(k): float(v) for k, v in accuracy.items()} if accuracy else None)


def start_in_child(recorder: Recorder, payload: str) -> ChildHooks:
    """Install the failure probe (after the recorder started: both import torch, which the
    recorder times)."""
    from dynscope.minifier.probe import FailureProbe, StopProgram

    options = DetectionOptions.from_payload(payload)
    probe = FailureProbe(options.out_dir, accuracy=options.accuracy).install()

    def stop_for(exc: BaseException) -> ProgramStop | None:
        if not isinstance(exc, StopProgram):
            return None
        return ProgramStop(exc.original, "stopped the program at its first failing graph", STOPPED_AT_FAILURE)

    return ChildHooks(remove=probe.remove, stop_for=stop_for)
