"""Recompile records: torch's recompile reasons, each guard failure explained by dynscope's probe."""

from __future__ import annotations

from dynscope import events as contract
from dynscope.model.reading import RecordReader
from dynscope.model.recompile_text import guard_failure
from dynscope.model.records import Compile, Recompile

_REASONS = "artifact:recompile_reasons"


def read_recompiles(records: RecordReader, compiles: dict[str, Compile]) -> list[Recompile]:
    reader = records.reader
    probes = [(event.id, seen) for seen, event in records.records(contract.GuardFailureSeen)]
    out = []
    for event in reader.events([_REASONS]):
        reasons = contract.recompile_reasons(reader.payload(event.payload_hash))
        if not reasons or event.compile_id is None:
            continue
        # The same guard can fail on many calls: the probe that explains this recompile
        # is the latest one with the same text before it.
        latest = {seen.reason: seen for id_, seen in probes if id_ < event.id}
        failures = tuple(guard_failure(text, latest.get(text)) for text in reasons)
        compile_ = compiles.get(event.compile_id)
        out.append(Recompile(
            compile_id=event.compile_id,
            function=compile_.function if compile_ else "?",
            file=compile_.file if compile_ else None,
            line=compile_.line if compile_ else None,
            reason=failures[0].reason,
            failures=failures,
        ))
    return out
