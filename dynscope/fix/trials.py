"""Run ``dynscope explain`` on the program once per remedy set, several at a time, within a budget.

Each run is a fresh process (caches off, as ``explain``) with ``DYNSCOPE_FIX`` naming the
remedies its child applies (dynscope/fix/apply.py). This process never imports torch: it reads
each run's capture through the model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dynscope.analysis.fix_verdict import RunFacts, metrics_of
from dynscope.analysis.remedies import FixProblem, problem_counts, problems_of
from dynscope.errors import DynscopeError
from dynscope.events import Action
from dynscope.fix import scratch
from dynscope.model.fix import ENV, Features, applied_actions, program_seconds, trial_features, trial_outputs
from dynscope.runner.program import Program


@dataclass
class TrialRun:
    name: str  # file stem in the output directory: baseline, trial-3, combined
    actions: list[Action]
    out_dir: str  # absolute
    cwd: str | None = None  # where the program runs (None: here); --from: where the recorded run ran
    profile: bool = False  # measure the run's time with `explain --profile` (fix --profile)
    facts: RunFacts | None = None
    problems: list[FixProblem] = field(default_factory=list)  # read from its capture's view
    compiled: bool = False  # it compiled something
    torch_version: str | None = None
    features: Features = field(default_factory=Features)
    wall_s: float | None = None
    skipped: str | None = None  # why it was not run (the budget)
    workdir: str | None = None  # the scratch copy of the working directory it runs in (None: the directory itself)
    workdir_note: str | None = None  # why it ran in the directory itself

    @property
    def capture(self) -> str:
        return os.path.join(self.out_dir, f"{self.name}.dynscope")

    def environment(self) -> dict[str, str]:
        """What its child reads (dynscope/fix/apply.py): the remedies, and where to run."""
        return {ENV: json.dumps({"remedies": [a.to_json() for a in self.actions], "workdir": self.workdir})}


def program_argv(program: Program) -> list[str]:
    return (["-m", program.target] if program.kind == "module" else [program.target]) + list(program.args)


def run_all(program: Program, runs: list[TrialRun], *, jobs: int, deadline: float, estimate_s: float,
            on_done: Callable[[TrialRun], None] = lambda run: None, starter: Starter | None = None) -> None:
    """Run them ``jobs`` at a time. One that cannot finish before ``deadline`` (judged by
    ``estimate_s``, a run's expected wall time) is not started; one still running at the deadline
    is stopped and counts as timed out."""
    starter = starter or Subprocesses()
    waiting = list(runs)
    running: list[tuple[TrialRun, Any, float]] = []
    try:
        while waiting or running:
            while waiting and len(running) < max(1, jobs):
                run = waiting.pop(0)
                if time.time() + estimate_s * 0.5 > deadline:
                    run.skipped = _OUT_OF_BUDGET
                    on_done(run)
                    continue
                _clear(run)
                _make_workdir(run)
                handle = starter.start(program, run, deadline)
                if handle is None:  # the fork server was still starting when the budget ran out
                    scratch.remove(run.workdir)
                    run.skipped = _OUT_OF_BUDGET
                    on_done(run)
                    continue
                running.append((run, handle, time.time()))
            time.sleep(0.05)
            for item in list(running):
                run, handle, started = item
                returncode = starter.poll(handle)
                timed_out = False
                if returncode is None:
                    if time.time() < deadline:
                        continue
                    returncode = starter.stop(handle)
                    timed_out = True
                run.wall_s = time.time() - started
                starter.finish(run, returncode, run.wall_s)
                scratch.remove(run.workdir)
                _read(run, timed_out=timed_out)
                running.remove(item)
                on_done(run)
    finally:
        for run, handle, _started in running:  # interrupted: leave no run behind
            starter.stop(handle)
            scratch.remove(run.workdir)


_OUT_OF_BUDGET = "the budget ran out before it could start"


def _clear(run: TrialRun) -> None:
    """What an earlier fix run left under this run's names (``--out`` names a directory used before);
    a link there is removed, never followed."""
    stem = os.path.join(run.out_dir, run.name)
    for suffix in (".dynscope", ".dynscope-wal", ".dynscope-shm", ".dynscope.lock", ".stdout", ".stderr"):
        try:
            os.remove(stem + suffix)
        except OSError:
            pass
    scratch.remove(_workdir_path(run))


def new_file(path: str):
    """``path`` opened for writing as a new file: whatever had that name (a link to somewhere
    else, in a directory given with --out) is removed first, never written through."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise DynscopeError(f"cannot write {path}: {e.strerror}") from None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as e:
        raise DynscopeError(f"cannot write {path}: {e.strerror}") from None
    return os.fdopen(fd, "wb")


def _workdir_path(run: TrialRun) -> str:
    return os.path.join(run.out_dir, f"{run.name}.cwd")


def _make_workdir(run: TrialRun) -> None:
    """A scratch copy of the directory the program runs in (dynscope/fix/scratch.py); where one
    cannot be made, the run uses the directory itself and says why."""
    path = _workdir_path(run)
    try:
        scratch.make(os.path.abspath(run.cwd or os.getcwd()), path)
        run.workdir = path
    except (scratch.TooLarge, OSError) as e:
        scratch.remove(path)
        run.workdir = None
        run.workdir_note = str(e) if isinstance(e, scratch.TooLarge) else f"cannot copy it: {e.strerror or e}"


def _explain_argv(program: Program, run: TrialRun) -> list[str]:
    return ["dynscope", "explain", "-q", *(["--profile"] if run.profile else []), "-o", run.capture,
            *program_argv(program)]


class Starter:
    """How a run is started: a ``dynscope explain`` process, or a fork of the zygote."""

    def start(self, program: Program, run: TrialRun, deadline: float) -> Any: ...  # None: not started by then
    def poll(self, handle: Any) -> int | None: ...
    def stop(self, handle: Any) -> int: ...
    def finish(self, run: TrialRun, returncode: int, wall_s: float) -> None: ...
    def close(self) -> None: ...


class Subprocesses(Starter):
    """``python -m dynscope explain`` per run: what a user would type."""

    def start(self, program: Program, run: TrialRun, deadline: float) -> Any:
        stdout = new_file(os.path.join(run.out_dir, f"{run.name}.stdout"))
        stderr = new_file(os.path.join(run.out_dir, f"{run.name}.stderr"))
        argv = [sys.executable, "-m", *_explain_argv(program, run)]
        env = {**os.environ, **run.environment()}
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env,
                                start_new_session=True, cwd=run.cwd)
        stdout.close()
        stderr.close()
        return proc

    def poll(self, proc: subprocess.Popen) -> int | None:
        return proc.poll()

    def stop(self, proc: subprocess.Popen) -> int:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        return proc.wait()

    def finish(self, run: TrialRun, returncode: int, wall_s: float) -> None:
        pass  # explain recorded how the run ended

    def close(self) -> None:
        pass


class Zygote(Starter):
    """Runs forked from one process that imported torch already (dynscope/fix/zygote.py): the
    child runs what the explain child runs; this side records how it ended, as explain does."""

    def __init__(self, log_path: str) -> None:
        import queue
        import threading

        self._log = new_file(log_path)
        self.proc = subprocess.Popen([sys.executable, "-m", "dynscope.fix.zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log)
        self._messages: queue.Queue = queue.Queue()
        self.pids: dict[str, int] = {}
        self.ended: dict[str, int] = {}
        self.ready = False
        self.fallback: Subprocesses | None = None

        def read() -> None:
            for line in self.proc.stdout:
                self._messages.put(json.loads(line))
            self._messages.put(None)

        threading.Thread(target=read, daemon=True).start()

    def _drain(self, *, wait_for: str | None = None, timeout: float = 600.0) -> None:
        import queue

        end = time.time() + timeout
        while True:
            try:
                message = self._messages.get(timeout=0.05 if wait_for else 0)
            except queue.Empty:
                if not wait_for or time.time() > end:
                    return
                continue
            if message is None:
                raise DynscopeError("the trial server stopped (see zygote.stderr in the output directory)")
            if message.get("ready") is False:  # it will not fork here: one explain process per run
                self.fallback = Subprocesses()
                self.ready = True
            elif message.get("ready"):
                self.ready = True
            elif "pid" in message:
                self.pids[message["id"]] = message["pid"]
            elif "returncode" in message:
                self.ended[message["id"]] = message["returncode"]
            if wait_for == "ready" and self.ready or wait_for and wait_for in self.pids:
                return

    def start(self, program: Program, run: TrialRun, deadline: float) -> Any:
        if not self.ready:
            self._drain(wait_for="ready", timeout=max(0.0, deadline - time.time()))
            if not self.ready:
                return None
        if self.fallback is not None:
            return self.fallback.start(program, run, deadline)
        spec = {"program": {"kind": program.kind, "target": program.target, "args": list(program.args)},
                "capture": run.capture, "keep_caches": False, "profile": run.profile, "command": _explain_argv(program, run)}
        request = {"id": run.name, "spec": spec, "env": run.environment(),
                   "stdout": os.path.join(run.out_dir, f"{run.name}.stdout"),
                   "stderr": os.path.join(run.out_dir, f"{run.name}.stderr"), "cwd": run.cwd}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        self._drain(wait_for=run.name)
        return run.name

    def poll(self, name: Any) -> int | None:
        if self.fallback is not None:
            return self.fallback.poll(name)
        self._drain()
        return self.ended.get(name)

    def stop(self, name: Any) -> int:
        if self.fallback is not None:
            return self.fallback.stop(name)
        try:
            os.killpg(self.pids[name], signal.SIGKILL)
        except (OSError, KeyError):
            pass
        end = time.time() + 10
        while name not in self.ended and time.time() < end:
            self._drain()
            time.sleep(0.02)
        return self.ended.get(name, -signal.SIGKILL)

    def finish(self, run: TrialRun, returncode: int, wall_s: float) -> None:
        if self.fallback is not None:
            return  # explain recorded how the run ended
        from dynscope.runner.launcher import finish_capture

        finish_capture(run.capture, returncode, wall_s)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        # With its input closed it ends every child it still has and exits at once; one still
        # importing torch (fix stopped early) reads nothing yet, so it is ended here.
        for ending in (signal.SIGTERM, signal.SIGKILL):
            try:
                self.proc.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                self.proc.send_signal(ending)
        else:
            self.proc.wait()
        self._log.close()


def starter_for(out_dir: str) -> Starter:
    """The zygote where fork exists (POSIX), else one explain process per run."""
    if hasattr(os, "fork") and os.environ.get("DYNSCOPE_FIX_NO_FORK") != "1":
        return Zygote(os.path.join(out_dir, "zygote.stderr"))
    return Subprocesses()


def _read(run: TrialRun, *, timed_out: bool) -> None:
    from dynscope.analysis.run_view import run_view
    from dynscope.errors import DynscopeError
    from dynscope.model import Capture

    try:
        with open(os.path.join(run.out_dir, f"{run.name}.stdout"), "rb") as f:
            stdout = f.read().decode("utf-8", "replace")
    except OSError:  # the run never got as far as its output file
        stdout = ""
    try:
        with Capture.open(run.capture) as capture:
            view = run_view(capture)
            problems = problems_of(view)
            metrics = metrics_of(view, program_seconds(capture))
            ended = capture.run
            outputs = trial_outputs(capture)
            run.features = trial_features(capture)
            applied = applied_actions(capture)
            run.compiled = bool(view.compiles)
    except (DynscopeError, OSError):
        run.facts = RunFacts(False, None, None, stdout, None, {}, (), timed_out=timed_out)
        return
    notes = tuple(f"{a.OP} did not apply" for i, a in enumerate(run.actions) if i not in applied)
    run.problems = problems
    run.torch_version = ended.torch_version
    run.facts = RunFacts(True, ended.exit_code, ended.signal, stdout, metrics, problem_counts(problems),
                         tuple(outputs), notes, timed_out)
