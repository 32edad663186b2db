"""The child extension of ``dynscope numerics``: installs the check in the recording child and,
once the program ended, records what it found as one ``NumericsChecked`` event.

Named in the ChildSpec by the command (never through an environment variable); the payload is
``NumericsOptions`` as JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dynscope.runner.extensions import ChildHooks
from dynscope.runner.spec import ChildExtension, SpecError

if TYPE_CHECKING:
    from dynscope.numerics.engine import NumericsProbe
    from dynscope.recorder import Recorder

EXTENSION = "dynscope.numerics.child"


@dataclass(frozen=True)
class NumericsOptions:
    factor: float | None  # None: torch's multiplier rule
    tolerance: float

    def extension(self) -> ChildExtension:
        return ChildExtension(EXTENSION, json.dumps({"factor": self.factor, "tolerance": self.tolerance}))

    @classmethod
    def from_payload(cls, payload: str) -> NumericsOptions:
        data = json.loads(payload)
        if not isinstance(data, dict):
            raise SpecError("the numerics payload is not an object")
        factor, tolerance = data.get("factor"), data.get("tolerance")
        if factor is not None and not (isinstance(factor, (int, float)) and _positive(factor)):
            raise SpecError("the numerics factor is not a positive number")
        if not (isinstance(tolerance, (int, float)) and _positive(tolerance, zero=True)):
            raise SpecError("the numerics tolerance is not a number >= 0")
        return cls(None if factor is None else float(factor), float(tolerance))


def _positive(value: object, *, zero: bool = False) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return False
    return value >= 0 if zero else value > 0


def start_in_child(recorder: Recorder, payload: str) -> ChildHooks:
    from dynscope.numerics.criterion import Criterion
    from dynscope.numerics.engine import NumericsProbe

    options = NumericsOptions.from_payload(payload)
    probe = NumericsProbe(Criterion(options.factor, options.tolerance)).install()

    def remove() -> None:
        probe.remove()
        _record(recorder, probe)

    return ChildHooks(remove=remove)


def _record(recorder: Recorder, probe: NumericsProbe) -> None:
    from dynscope import events as contract
    from dynscope.numerics import criterion as rule
    from dynscope.numerics.engine import dtype_name

    results = sorted(probe.results, key=lambda r: r.order)
    nodes = tuple(n for r in results for n in r.nodes)
    programs = {dtype_name(r.program_dtype) for r in results}
    program = min(programs, key=lambda d: (d not in rule.LOW_PRECISION, d), default="")
    references = {dtype_name(r.reference_dtype) for r in results}
    record = contract.NumericsChecked(
        verdict=rule.verdict(nodes), criterion=probe.criterion.in_words(), factor=probe.criterion.recorded_factor,
        tolerance=probe.criterion.tolerance, reference_dtype="float32" if "float32" in references else
        ("float64" if references else ""), program_dtype=program, graphs_checked=len(results),
        first_suspect=rule.first_suspect(nodes), nodes=nodes, elapsed_s=round(probe.elapsed_s, 4),
        not_compared=sum(r.not_compared for r in results), notes=tuple(probe.errors))
    contract.write(recorder, record)
