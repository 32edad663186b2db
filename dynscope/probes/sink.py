"""What a probe writes to: the recorder, seen through a narrow interface."""

from __future__ import annotations

from typing import Any, Protocol

from dynscope.events import Appender


class Sink(Appender, Protocol):
    """``append`` (dynscope.events.Appender: what ``events.write`` writes through), plus:"""

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
