"""The numerics check of a run (``dynscope numerics``), as the model reads it.

``dynscope numerics`` writes one ``NumericsChecked`` event (dynscope.events) into the capture:
every intermediate of the compiled graphs, its compiled and eager error against a reference,
which nodes are suspects and which changed from one compiled run to the next. This module reads
it once, typed; the views read it through ``RunView.numerics``. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dynscope.events import NumericsChecked, NumericsNode
from dynscope.model.reading import RecordReader
from dynscope.model.records import StackFrame

Verdict = Literal["suspect", "within", "nondeterministic"]
Direction = Literal["forward", "backward"]
_VERDICTS: tuple[Verdict, ...] = ("suspect", "within", "nondeterministic")


@dataclass(frozen=True)
class Numerics:
    """One numerics check: its verdict, the criterion it judged by, and every node compared."""

    verdict: Verdict
    criterion: str  # in words, as `dynscope numerics` stated it
    factor: float  # compiled error may exceed eager's by this factor ...
    tolerance: float  # ... plus this absolute slack
    reference_dtype: str
    program_dtype: str
    graphs_checked: int
    nodes: tuple[NumericsNode, ...]  # in the order recorded: per graph and direction, in node order
    first_suspect: NumericsNode | None
    elapsed_s: float

    @property
    def suspects(self) -> tuple[NumericsNode, ...]:
        return tuple(n for n in self.nodes if n.suspect)

    @property
    def nondeterministic(self) -> tuple[NumericsNode, ...]:
        return tuple(n for n in self.nodes if n.nondeterministic)


def read_numerics(records: RecordReader) -> Numerics | None:
    """The run's numerics check (the last one, when it was checked more than once), or None when it
    was not checked. An event of the wrong shape is counted as not understood and reads as None."""
    found = records.records(NumericsChecked)
    if not found:
        return None
    checked, _event = found[-1]
    verdict: Verdict = next((v for v in _VERDICTS if v == checked.verdict), "within")
    if checked.verdict not in _VERDICTS:  # a verdict this reader does not know: say what the nodes say
        verdict = "suspect" if any(n.suspect for n in checked.nodes) else "within"
    index = checked.first_suspect
    first = checked.nodes[index] if index is not None and 0 <= index < len(checked.nodes) else None
    return Numerics(verdict, checked.criterion, checked.factor, checked.tolerance, checked.reference_dtype,
                    checked.program_dtype, checked.graphs_checked, checked.nodes, first, checked.elapsed_s)


def node_site(node: NumericsNode) -> StackFrame:
    """Where in the user's code a node is: the innermost frame of its stack, else its "path:line" source."""
    frame = node.stack[-1] if node.stack else None
    if frame is not None and frame.file:
        return StackFrame(frame.file, frame.line, frame.function, frame.code)
    path, sep, line = node.source.rpartition(":")
    function = frame.function if frame is not None else None
    if sep and line.isdigit():
        return StackFrame(path, int(line), function)
    return StackFrame(node.source or None, None, function)
