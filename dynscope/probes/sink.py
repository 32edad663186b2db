"""What a probe writes to: the recorder, seen through a narrow interface."""

from __future__ import annotations

from typing import Any, Protocol


class Sink(Protocol):
    def append(
        self,
        name: str,
        metadata: dict[str, Any],
        payload: str | None = None,
        *,
        compile_id: str | None = None,
        attempt: int | None = None,
        ts: float | None = None,
    ) -> int | None: ...

    def append_json(
        self,
        name: str,
        metadata: dict[str, Any],
        payload: Any,
        *,
        compile_id: str | None = None,
        attempt: int | None = None,
    ) -> int | None: ...

    def note_error(self, message: str) -> None: ...
