"""multiprocessing's ``spawn`` and ``forkserver`` children are recorded too.

Such a child is a fresh interpreter: nothing of the program's recorder is in it. multiprocessing
sends it a dict of "preparation data" (pickled) before anything else; while the program is
recorded, that dict also carries a small object whose unpickling starts a recorder in the child
(``_RecordInChild``), naming the function that starts it (``dynscope.recorder`` passes its own:
this module imports no recorder). Its probes are installed when the child first imports ``torch._dynamo``
(a worker that never compiles, a DataLoader worker, pays nothing), and its capture is created by
its first event, beside the program's (dynscope.runner.children).

Only multiprocessing's own children are reached this way: a program started with subprocess is
not recorded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from dynscope.import_hooks import when_imported

_WHEN_COMPILING = "torch._dynamo"


@dataclasses.dataclass(frozen=True)
class SpawnedSpec:
    """What the child's recorder needs: the program's recording and its options."""

    root_path: str
    root_pid: int
    root_started: float
    keep_caches: bool
    command: list[str] | None
    profile: bool
    force_eager: bool


class _RecordInChild:
    """Unpickled in the child as a call to ``record_in_child(start, spec)``; ``start`` is a
    module-level function, pickled by its name."""

    def __init__(self, start: Callable[[SpawnedSpec], None], spec: SpawnedSpec) -> None:
        self.start = start
        self.spec = spec

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return record_in_child, (self.start, dataclasses.asdict(self.spec))


def record_in_child(start: Callable[[SpawnedSpec], None], spec: dict[str, Any]) -> None:
    """In the spawned child, while multiprocessing reads its preparation data."""
    when_imported(_WHEN_COMPILING, lambda _module: start(SpawnedSpec(**spec)))


def send_to_spawned_children(start: Callable[[SpawnedSpec], None], spec: SpawnedSpec) -> Callable[[], None]:
    """While recording: every spawn/forkserver child multiprocessing starts calls ``start(spec)``
    when it first imports torch._dynamo. Returns the undo."""
    patched: list[Any] = []

    def patch(spawn: Any) -> None:
        original = spawn.get_preparation_data

        def get_preparation_data(name: str) -> dict[str, Any]:
            data: dict[str, Any] = original(name)
            data["dynscope_recording"] = _RecordInChild(start, spec)
            return data

        spawn.get_preparation_data = get_preparation_data
        patched.append((spawn, original))

    undo_hook = when_imported("multiprocessing.spawn", patch)

    def undo() -> None:
        undo_hook()
        for spawn, original in patched:
            spawn.get_preparation_data = original

    return undo
