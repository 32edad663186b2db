"""Events read into the contract's records (dynscope.events), and a tally of those that were not.

An event whose data is not its kind's declared shape is skipped and counted per kind with why
the first one was not understood (``Capture.not_understood()``): views say so, never guess.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from dynscope import events as contract
from dynscope.events import NotUnderstood, Record
from dynscope.store.json_text import JsonValue
from dynscope.store.reader import CaptureReader, Event

R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class FieldRow:
    """An event's columns, for a record read from fields SQLite extracted (``RecordReader.rows``)."""

    id: int
    ts: float
    compile_id: str | None
    attempt: int | None


class RecordReader:
    """Reads a capture's events as records and counts those it could not read (thread-safe)."""

    def __init__(self, reader: CaptureReader) -> None:
        self.reader = reader
        self._lock = threading.Lock()
        self._not_understood: dict[str, dict[int, str]] = {}  # kind -> {event id: why}

    def parse(self, record: type[R], event: Event) -> R | None:
        """The event's record, or None when its data is not the declared shape (counted)."""
        try:
            return record.parse(event.metadata)
        except NotUnderstood as e:
            self.not_parsed(e, event.id)
            return None

    def records(self, record: type[R], compile_id: str | None = None) -> list[tuple[R, Event]]:
        """(record, event) for each event of the kind whose data has the declared shape."""
        found = []
        for event in self.reader.events([record.KIND], compile_id=compile_id):
            parsed = self.parse(record, event)
            if parsed is not None:
                found.append((parsed, event))
        return found

    def rows(self, record: type[R]) -> list[tuple[FieldRow, R]]:
        """(row, record) for each event of the kind whose fields have the declared shape; the fields
        are extracted by SQLite (CaptureReader.event_fields), not by parsing whole metadata."""
        # "field:" keeps a field named like a column (compile_id) apart from the column
        paths = record.json_paths()
        found = []
        for row in self.reader.event_fields([record.KIND], {"field:" + k: p for k, p in paths.items()}):
            fields: Mapping[str, JsonValue] = {name: row["field:" + name] for name in paths}
            try:
                parsed = record.from_fields(fields)
            except NotUnderstood as e:
                self.not_parsed(e, row["id"])
                continue
            found.append((FieldRow(row["id"], row["ts"], row["compile_id"], row["attempt"]), parsed))
        return found

    def not_parsed(self, error: NotUnderstood, event_id: int) -> None:
        with self._lock:
            self._not_understood.setdefault(error.kind, {}).setdefault(event_id, error.why)

    def meta_not_parsed(self, bad: Mapping[str, str]) -> None:
        """The meta table's fields that were not the declared shape: one entry per field."""
        if bad:
            with self._lock:
                self._not_understood["meta"] = {-1 - i: why for i, why in enumerate(bad.values())}

    def tally(self) -> dict[str, tuple[int, str]]:
        """Per kind: (how many events were not understood, why the first was not); kinds the
        contract does not name count too."""
        with self._lock:
            found = {kind: (len(ids), next(iter(ids.values()))) for kind, ids in sorted(self._not_understood.items())}
        for kind, count in self.reader.name_counts().items():
            if not contract.is_known(kind):
                found[kind] = (count, "an event kind dynscope does not know")
        return found
