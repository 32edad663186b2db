"""multiprocessing's ``spawn`` and ``forkserver`` children are recorded too.

Such a child is a fresh interpreter: nothing of the program's recorder is in it. multiprocessing
sends it a dict of "preparation data" (pickled) before anything else; while the program is
recorded, that dict also carries a small object whose unpickling starts a recorder in the child
(``_RecordInChild``). Its probes are installed when the child first imports ``torch._dynamo``
(a worker that never compiles, a DataLoader worker, pays nothing), and its capture is created by
its first event, beside the program's (dynscope.runner.children).

Only multiprocessing's own children are reached this way: a program started with subprocess is
not recorded.
"""

from __future__ import annotations

import dataclasses
import sys
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
    """Unpickled in the child as a call to ``record_in_child(spec)``."""

    def __init__(self, spec: SpawnedSpec) -> None:
        self.spec = spec

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return record_in_child, (dataclasses.asdict(self.spec),)


def record_in_child(spec: dict[str, Any]) -> None:
    """In the spawned child, while multiprocessing reads its preparation data."""
    when_imported(_WHEN_COMPILING, lambda _module: _start(SpawnedSpec(**spec)))


def _start(spec: SpawnedSpec) -> None:
    import os

    from dynscope.recorder import Family, Recorder
    from dynscope.runner.children import child_capture_path

    family = Family(spec.root_path, spec.root_pid, spec.root_started)
    recorder = Recorder(child_capture_path(spec.root_path, os.getpid()), keep_caches=spec.keep_caches,
                        command=spec.command, profile=spec.profile, force_eager=spec.force_eager, family=family)
    try:
        recorder.start()
    except Exception as e:  # noqa: BLE001  the child runs on unrecorded rather than fail inside its import of torch
        print(f"dynscope: not recording child process {os.getpid()}: {e}", file=sys.stderr)


def send_to_spawned_children(spec: SpawnedSpec) -> Callable[[], None]:
    """While recording: every spawn/forkserver child multiprocessing starts gets a recorder.
    Returns the undo."""
    patched: list[Any] = []

    def patch(spawn: Any) -> None:
        original = spawn.get_preparation_data

        def get_preparation_data(name: str) -> dict[str, Any]:
            data: dict[str, Any] = original(name)
            data["dynscope_recording"] = _RecordInChild(spec)
            return data

        spawn.get_preparation_data = get_preparation_data
        patched.append((spawn, original))

    undo_hook = when_imported("multiprocessing.spawn", patch)

    def undo() -> None:
        undo_hook()
        for spawn, original in patched:
            spawn.get_preparation_data = original

    return undo
