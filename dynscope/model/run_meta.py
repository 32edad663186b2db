"""The run as a whole (``Run``), from the capture's meta table."""

from __future__ import annotations

from dynscope import events as contract
from dynscope.model.reading import RecordReader
from dynscope.model.records import Run

# Why a capture whose writer never closed it is incomplete (it recorded no other reason).
NEVER_CLOSED = ("the recording has not ended: the process writing it is still running, or was killed "
                "before it could close the capture")


def read_run(records: RecordReader) -> Run:
    # Field by field: a run whose pid is text still has its command and times.
    m, bad = contract.CaptureMeta.parse_each(records.reader.meta)
    records.meta_not_parsed(bad)  # counted like events: one entry per field
    return Run(
        path=records.reader.path,
        dynscope_version=m.dynscope_version,
        torch_version=m.torch_version,
        python=m.python,
        command=list(m.command),
        cwd=m.cwd,
        hostname=m.hostname,
        pid=m.pid,
        rank=m.rank,
        world_size=m.world_size,
        started=m.started,
        finished=m.finished,
        exit_code=m.exit_code,
        signal=m.signal,
        keep_caches=m.keep_caches,
        device=m.device,
        probes=m.probes,
        probe_details=m.probe_details,
        probe_errors=m.probe_errors,
        imported=m.imported,
        incomplete=(m.incomplete_reason or NEVER_CLOSED) if m.complete is False else None,
        child_captures=m.child_captures,
        parent_pid=m.parent_pid,
    )
