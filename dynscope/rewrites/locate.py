"""Finding the statement torch's line number points at."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider


def statements_at(module: cst.Module, line: int) -> list[cst.SimpleStatementLine]:
    """The simple statements (one-line statements: calls, assignments, asserts) that span ``line``."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    return [node for node, where in positions.items()
            if isinstance(node, cst.SimpleStatementLine) and where.start.line <= line <= where.end.line]
