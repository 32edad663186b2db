"""A recording session: a capture file being written while probes listen inside torch.

Used directly as ``with dynscope.capture(path):`` and by the ``explain`` child process.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import platform
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dynscope import events
from dynscope._version import __version__
from dynscope.errors import CaptureError
from dynscope.store.writer import CaptureWriter

if TYPE_CHECKING:
    from dynscope.probes import InstalledProbes
    from dynscope.runner.spawned import SpawnedSpec

# Probe errors are recorded, but a broken probe firing on every event must not flood the file.
_MAX_RECORDED_PROBE_ERRORS = 20


@dataclasses.dataclass(frozen=True)
class Family:
    """The program's recording, which a child process's recorder belongs to."""

    root_path: str  # the program's capture; children's are named after it
    root_pid: int
    root_started: float


class Recorder:
    def __init__(self, path: str, *, keep_caches: bool = False, command: list[str] | None = None,
                 profile: bool = False, force_eager: bool = False, family: Family | None = None,
                 cache_keys: bool = True) -> None:
        """``family``: this records a child process of that program (dynscope.runner.children):
        the capture file is created by the first event. ``cache_keys``: with caches kept, record
        AOTAutograd's cache-key details (bench/cache_keys.py measures what that costs)."""
        self.path = os.path.abspath(path)
        self.keep_caches = keep_caches
        self.command = command
        self.profile = profile or force_eager  # an eager run exists to be timed
        self.force_eager = force_eager
        self.cache_keys = cache_keys
        self.probe_errors = 0
        self._writer: CaptureWriter | None = None
        self._probes: InstalledProbes | None = None
        self._started = 0.0
        self._family = family
        self._parent_pid: int | None = os.getppid() if family is not None else None
        self._open_on_first_event = family is not None
        self._opening = threading.Lock()
        self._stop_sending: Callable[[], None] | None = None  # undoes send_to_spawned_children

    # -- session ---------------------------------------------------------------------------

    def start(self) -> Recorder:
        from dynscope.probes import install_probes  # imports torch

        self._started = time.time()
        if self._family is None:
            self._family = Family(self.path, os.getpid(), self._started)
        if not self._open_on_first_event:
            self._writer = CaptureWriter(self.path)
            self._writer.set_meta(**self._run_meta())
        self._probes = install_probes(self, keep_caches=self.keep_caches, profile=self.profile,
                                      force_eager=self.force_eager, cache_keys=self.cache_keys)
        if self._writer is not None:
            self._writer.set_meta(**self._probe_meta())
            events.write(self, events.RunStart(argv=tuple(sys.argv), keep_caches=self.keep_caches))
        _RECORDING.add(self)
        from dynscope.runner.spawned import SpawnedSpec, send_to_spawned_children

        family = self._family
        self._stop_sending = send_to_spawned_children(record_in_spawned_child, SpawnedSpec(
            family.root_path, family.root_pid, family.root_started, keep_caches=self.keep_caches,
            command=self.command, profile=self.profile, force_eager=self.force_eager))
        return self

    def _run_meta(self) -> dict[str, Any]:
        from dynscope.probes import compat

        rank, world = _rank_from_env()
        family = self._family if self._parent_pid is not None else None  # only a child names its program
        return dict(
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
            root_pid=family.root_pid if family else None,
            root_started=family.root_started if family else None,
            parent_pid=self._parent_pid,
        )

    def _probe_meta(self) -> dict[str, Any]:
        assert self._probes is not None, "probe metadata is written after the probes are installed"
        return dict(probes=self._probes.available, probe_details=self._probes.details,
                    profiled=self.profile, forced_eager=self.force_eager)

    def _open_for_first_event(self) -> CaptureWriter | None:
        """A child process's capture, created when it first has something to record."""
        with self._opening:
            if self._writer is None and self._open_on_first_event and self._probes is not None:
                self._open_on_first_event = False
                try:
                    writer = CaptureWriter(self.path)
                    writer.set_meta(**self._run_meta(), **self._probe_meta())
                except (CaptureError, OSError) as e:
                    print(f"dynscope: not recording child process {os.getpid()}: {e}", file=sys.stderr)
                    return None
                self._writer = writer
                events.write(self, events.RunStart(argv=tuple(sys.argv), keep_caches=self.keep_caches))
                _close_at_exit(self)
            return self._writer

    def record_exception(self, exc: BaseException) -> None:
        events.write(self, events.ProgramRaised(type=type(exc).__qualname__, module=type(exc).__module__,
                                                message=_safe_str(exc)),
                     "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))

    def stop(self, *, exit_code: int | None = None) -> None:
        """Remove the probes and close the file. ``exit_code`` is recorded when known here."""
        _RECORDING.discard(self)
        self._open_on_first_event = False
        if self._stop_sending is not None:
            self._stop_sending()
            self._stop_sending = None
        if self._probes is not None:
            self._probes.remove()
            self._probes = None
        if self._writer is None:
            return
        from dynscope.probes import compat

        rank, world = compat.dist_rank_and_world()
        if rank is not None:
            self._writer.set_meta(rank=rank, world_size=world)
        self._writer.set_meta(device=compat.device_summary(), probe_errors=self.probe_errors)
        events.write(self, events.ProbesRemoved(elapsed_s=time.time() - self._started))
        if exit_code is not None or self._parent_pid is not None:  # no launcher records a child's end
            record_run_end(self._writer, exit_code=exit_code, signal=None, elapsed_s=time.time() - self._started)
        if self._parent_pid is None:  # the program's children so far (explain's launcher lists them again at the end)
            from dynscope.runner.children import find_child_captures

            children = find_child_captures(self.path, root_pid=os.getpid(), root_started=self._started)
            if children:
                self._writer.set_meta(child_captures=[dataclasses.asdict(c) for c in children])
        self._writer.close()
        self._writer = None

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None:
            self.record_exception(exc)
        self.stop(exit_code=0 if exc is None else 1)

    @property
    def recording(self) -> bool:
        """Whether the capture file is open for writing."""
        return self._writer is not None

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
            if not self._open_on_first_event:
                return None
            writer = self._open_for_first_event()
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

    # -- child processes -----------------------------------------------------------------

    def _forked(self) -> None:
        """In a forked child: the writer is the parent's (its SQLite connection must never be
        used here); what this child compiles goes to a capture of its own."""
        if self._writer is not None:
            self._writer.abandon_in_forked_child()
            self._writer = None
        from dynscope.runner.children import child_capture_path

        assert self._family is not None, "a forked child's recorder was started, so it has a family"
        self.path = child_capture_path(self._family.root_path, os.getpid())
        self._parent_pid = os.getppid()
        self._started = time.time()
        self.probe_errors = 0
        self._opening = threading.Lock()  # another thread may have held it at the fork
        self._open_on_first_event = self._probes is not None


def record_in_spawned_child(spec: SpawnedSpec) -> None:
    """In a multiprocessing spawn/forkserver child, when it first imports torch._dynamo
    (dynscope.runner.spawned): a recorder of the program's family, writing a capture of its own."""
    from dynscope.runner.children import child_capture_path

    family = Family(spec.root_path, spec.root_pid, spec.root_started)
    recorder = Recorder(child_capture_path(spec.root_path, os.getpid()), keep_caches=spec.keep_caches,
                        command=spec.command, profile=spec.profile, force_eager=spec.force_eager, family=family)
    try:
        recorder.start()
    except Exception as e:  # noqa: BLE001  the child runs on unrecorded rather than fail inside its import of torch
        print(f"dynscope: not recording child process {os.getpid()}: {e}", file=sys.stderr)


# Recorders between start() and stop() in this process, for the fork hooks.
_RECORDING: set[Recorder] = set()


def _before_fork() -> None:
    for recorder in list(_RECORDING):  # no event half-written when the child's copy is taken
        if recorder._writer is not None:
            recorder._writer.hold_for_fork()


def _after_fork_in_parent() -> None:
    for recorder in list(_RECORDING):
        if recorder._writer is not None:
            recorder._writer.release_after_fork()


def _after_fork_in_child() -> None:
    for recorder in list(_RECORDING):
        recorder._forked()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)


def _close_at_exit(recorder: Recorder) -> None:
    """A child process's capture is closed when the process ends: at interpreter exit, or when a
    multiprocessing worker ends (it leaves through os._exit, after multiprocessing's finalizers).
    A child killed before either keeps every event committed; the launcher folds its WAL in."""
    atexit.register(recorder.stop)
    if "multiprocessing.util" in sys.modules:
        sys.modules["multiprocessing.util"].Finalize(None, recorder.stop, exitpriority=0)


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
