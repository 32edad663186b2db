"""A recording session: a capture file being written while probes listen inside torch.

Used directly as ``with dynscope.capture(path):`` and by the ``explain`` child process.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

from dynscope import events
from dynscope._version import __version__
from dynscope.store.writer import CaptureWriter

if TYPE_CHECKING:
    from dynscope.model import Capture
    from dynscope.probes import InstalledProbes

# Probe errors are recorded, but a broken probe firing on every event must not flood the file.
_MAX_RECORDED_PROBE_ERRORS = 20


class Recorder:
    def __init__(self, path: str, *, keep_caches: bool = False, command: list[str] | None = None,
                 profile: bool = False, force_eager: bool = False) -> None:
        self.path = os.path.abspath(path)
        self.keep_caches = keep_caches
        self.command = command
        self.profile = profile or force_eager  # an eager run exists to be timed
        self.force_eager = force_eager
        self.probe_errors = 0
        self._writer: CaptureWriter | None = None
        self._probes: InstalledProbes | None = None
        self._started = 0.0

    # -- session ---------------------------------------------------------------------------

    def start(self) -> Recorder:
        from dynscope.probes import compat, install_probes  # imports torch

        self._started = time.time()
        self._writer = CaptureWriter(self.path)
        rank, world = _rank_from_env()
        self._writer.set_meta(
            dynscope_version=__version__,
            torch_version=compat.torch_version(),
            python=platform.python_version(),
            platform=platform.platform(),
            hostname=socket.gethostname(),
            pid=os.getpid(),
            cwd=os.getcwd(),
            command=self.command if self.command is not None else list(sys.argv),
            started=self._started,
            rank=rank,
            world_size=world,
            keep_caches=self.keep_caches,
        )
        self._probes = install_probes(self, keep_caches=self.keep_caches, profile=self.profile,
                                      force_eager=self.force_eager)
        self._writer.set_meta(probes=self._probes.available, probe_details=self._probes.details,
                              profiled=self.profile, forced_eager=self.force_eager)
        events.write(self, events.RunStart(argv=tuple(sys.argv), keep_caches=self.keep_caches))
        return self

    def record_exception(self, exc: BaseException) -> None:
        events.write(self, events.ProgramRaised(type=type(exc).__qualname__, module=type(exc).__module__,
                                                message=_safe_str(exc)),
                     "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))

    def stop(self, *, exit_code: int | None = None) -> None:
        """Remove the probes and close the file. ``exit_code`` is recorded when known here."""
        if self._writer is None:
            return
        if self._probes is not None:
            self._probes.remove()
            self._probes = None
        from dynscope.probes import compat

        rank, world = compat.dist_rank_and_world()
        if rank is not None:
            self._writer.set_meta(rank=rank, world_size=world)
        self._writer.set_meta(device=compat.device_summary(), probe_errors=self.probe_errors)
        events.write(self, events.ProbesRemoved(elapsed_s=time.time() - self._started))
        if exit_code is not None:
            record_run_end(self._writer, exit_code=exit_code, signal=None, elapsed_s=time.time() - self._started)
        self._writer.close()
        self._writer = None

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None:
            self.record_exception(exc)
        self.stop(exit_code=0 if exc is None else 1)

    def load(self) -> Capture:
        from dynscope.model import Capture

        return Capture.open(self.path)

    # -- Sink ---------------------------------------------------------------------------------

    def append(
        self,
        name: str,
        metadata: dict[str, Any],
        payload: str | None = None,
        *,
        compile_id: str | None = None,
        attempt: int | None = None,
        ts: float | None = None,
    ) -> int | None:
        writer = self._writer
        if writer is None:
            return None
        return writer.append(name, metadata, payload, compile_id=compile_id, attempt=attempt, ts=ts)

    def append_json(
        self,
        name: str,
        metadata: dict[str, Any],
        payload: Any,
        *,
        compile_id: str | None = None,
        attempt: int | None = None,
    ) -> int | None:
        return self.append(
            name, metadata, json.dumps(payload, separators=(",", ":"), default=str),
            compile_id=compile_id, attempt=attempt,
        )

    def note_error(self, message: str) -> None:
        self.probe_errors += 1
        if self.probe_errors <= _MAX_RECORDED_PROBE_ERRORS:
            events.write(self, events.ProbeError(message=message))


def record_run_end(writer: CaptureWriter, *, exit_code: int | None, signal: int | None, elapsed_s: float) -> None:
    events.write(writer, events.RunEnd(exit_code=exit_code, signal=signal, elapsed_s=elapsed_s))
    writer.set_meta(exit_code=exit_code, signal=signal, finished=time.time())


def _rank_from_env() -> tuple[int | None, int | None]:
    """torchrun sets RANK / WORLD_SIZE before the script starts; process groups come later."""
    try:
        rank = int(os.environ["RANK"])
        world = int(os.environ.get("WORLD_SIZE", "1"))
    except (KeyError, ValueError):
        return None, None
    return rank, world


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return f"<unprintable {type(exc).__name__}>"
