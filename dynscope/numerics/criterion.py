"""The accuracy criterion of ``dynscope numerics``: torch's own (``torch._dynamo.utils.same`` with
``fp64_ref``), applied node by node. Pure functions: no torch.

A node passes when the compiled value is close to eager's (``allclose`` with rtol = atol = 10 x
tolerance), or when the compiled run's RMSE against the reference is at most ``multiplier`` x
eager's own RMSE against it plus ``tolerance``. torch's multiplier is 3 for bf16/fp16 values and
for tensors of fewer than 1000 elements, 2 otherwise; ``--factor`` fixes it instead.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dynscope.events import NumericsNode

Verdict = Literal["suspect", "within", "nondeterministic"]

DEFAULT_TOLERANCE = 1e-5  # torch's same() default tol (1e-4) enters its RMSE test as tol / 10
CLOSE_RATIO = 10.0  # ... and its allclose test as tol itself: rtol = atol = 10 x our tolerance
SMALL_TENSOR = 1000  # elements: below this torch allows 3x (noise dominates small tensors)
LOW_PRECISION = frozenset({"bfloat16", "float16"})
# An error that is not a number (the value is NaN or Inf where the reference is finite) is
# recorded as the largest float: JSON (and the capture's SQLite JSON) has no NaN or Infinity.
NONFINITE_ERROR = sys.float_info.max


@dataclass(frozen=True)
class Criterion:
    factor: float | None  # None: torch's rule (3 for bf16/fp16 or small tensors, else 2)
    tolerance: float = DEFAULT_TOLERANCE

    def multiplier(self, dtype: str, numel: int) -> float:
        if self.factor is not None:
            return self.factor
        return 3.0 if dtype in LOW_PRECISION or numel < SMALL_TENSOR else 2.0

    @property
    def recorded_factor(self) -> float:
        """The factor the record states: the one given, else torch's base multiplier."""
        return self.factor if self.factor is not None else 2.0

    def close_tolerance(self) -> float:
        return self.tolerance * CLOSE_RATIO

    def in_words(self) -> str:
        factor = (f"{self.factor:g}" if self.factor is not None
                  else f"2 (3 for bf16/fp16 values or fewer than {SMALL_TENSOR} elements)")
        return (f"a node is suspect when RMSE(compiled - reference) > {factor} x RMSE(eager - reference) + "
                f"{self.tolerance:g} and compiled is not allclose to eager (rtol = atol = {self.close_tolerance():g}); "
                "torch._dynamo.utils.same's rule with fp64_ref; nondeterministic nodes are never suspect")

    def is_suspect(self, *, eager_error: float, compiled_error: float, dtype: str, numel: int, close: bool) -> bool:
        """The node-level decision (``close``: compiled allclose to eager)."""
        if close:
            return False
        if math.isnan(compiled_error):
            return not math.isnan(eager_error)
        if math.isnan(eager_error):  # eager could not produce it at this precision; compiled did
            return False
        return compiled_error > self.multiplier(dtype, numel) * eager_error + self.tolerance


def finite_error(value: float) -> float:
    """An error as the record stores it (NaN and Inf become NONFINITE_ERROR)."""
    return value if math.isfinite(value) else NONFINITE_ERROR


def first_suspect(nodes: Sequence[NumericsNode]) -> int | None:
    """Index (into ``nodes``, which run in graph order, graphs in compile order) of the first suspect."""
    return next((i for i, n in enumerate(nodes) if n.suspect), None)


def verdict(nodes: Sequence[NumericsNode]) -> Verdict:
    if any(n.suspect for n in nodes):
        return "suspect"
    if any(n.nondeterministic for n in nodes):
        return "nondeterministic"
    return "within"


def exit_status(verdict_text: str) -> int:
    """1 when a suspect was found; 0 when within eager's own error or only nondeterministic."""
    return 1 if verdict_text == "suspect" else 0
