"""Run ``dynscope explain`` on the program once per remedy set, several at a time, within a budget.

Each run is a recording child forked from the runner's fork server, its ChildSpec naming the
remedies it applies as the child extension dynscope.fix.apply. The runs share one private cache
directory with the compile caches on (dynscope.runner.cache_dirs.SharedCacheDir): the baseline
fills it, and a trial that leaves a graph unchanged loads it instead of compiling it again (a
trial whose setting changes the cache key misses). This process never imports torch: it reads
each run's capture through the model.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from dynscope.analysis.fix_problems import FixProblem
from dynscope.analysis.fix_verdict import RunFacts, metrics_of
from dynscope.analysis.fix_view import Relocate, fix_problems, problem_counts
from dynscope.analysis.source_edits import line_map
from dynscope.errors import DynscopeError
from dynscope.events import Action, ChangeSource
from dynscope.fix import scratch
from dynscope.fix.trial_payload import EXTENSION as TRIAL_EXTENSION
from dynscope.fix.trial_payload import TrialRemedies
from dynscope.model.fix import Features, applied_actions, program_seconds, program_started_at, trial_features, trial_outputs
from dynscope.runner.cache_dirs import SharedCacheDir
from dynscope.runner.launcher import finish_capture
from dynscope.runner.program import Program
from dynscope.runner.runs import ProgramRuns, RunHandle
from dynscope.runner.spec import ChildSpec


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
    requested_at: float | None = None  # time.time() when it was asked for (the first run waits for the fork server)
    pid: int | None = None  # its child's
    startup_s: float | None = None  # from the request to the program's start (the recorder ready)
    rename_to: str | None = None  # an early trial the final selection took: its final name, given when it ends

    @property
    def capture(self) -> str:
        return os.path.join(self.out_dir, f"{self.name}.dynscope")


def program_argv(program: Program) -> list[str]:
    return (["-m", program.target] if program.kind == "module" else [program.target]) + list(program.args)


def run_all(program: Program, runs: list[TrialRun], *, jobs: int, deadline: float, estimate_s: float,
            on_done: Callable[[TrialRun], None] = lambda run: None, starter: Starter, pool: RunPool | None = None,
            more: list[TrialRun] | None = None) -> None:
    """Run them ``jobs`` at a time. One that cannot finish before ``deadline`` (judged by
    ``estimate_s``, a run's expected wall time) is not started; one still running at the deadline
    is stopped and counts as timed out. With ``pool``: beside the runs already in it (trials
    started while the baseline ran), which are waited for too. ``more``: runs ``on_done`` asks
    for on the way (the second baseline), queued behind the others."""
    pool = pool or RunPool(program, starter, deadline)
    waiting = list(runs)
    more = more if more is not None else []
    try:
        while waiting or more or pool.running:
            waiting.extend(more)
            more.clear()
            while waiting and len(pool.running) < max(1, jobs):
                pool.start(waiting.pop(0), estimate_s, on_done)
            pool.step()
    finally:
        pool.close()  # interrupted: leave no run behind


@dataclass
class _Running:
    run: TrialRun
    handle: RunHandle
    started: float
    on_done: Callable[[TrialRun], None]


class RunPool:
    """The runs in flight: started one by one, reaped as they end (their captures read), each
    stopped at the deadline. The session starts trials into it while the baseline still runs."""

    def __init__(self, program: Program, starter: Starter, deadline: float) -> None:
        self.program = program
        self.starter = starter
        self.deadline = deadline
        self.running: list[_Running] = []

    def start(self, run: TrialRun, estimate_s: float, on_done: Callable[[TrialRun], None]) -> bool:
        """False: not started (the budget), ``run.skipped`` says so and ``on_done`` was called;
        or given up while it waited (``run.skipped`` set by the caller, who reported it)."""
        if run.skipped is not None:
            return False
        if time.time() + estimate_s * 0.5 > self.deadline:
            run.skipped = _OUT_OF_BUDGET
            on_done(run)
            return False
        _clear(run)
        try:
            _make_workdir(run)
            handle = self.starter.start(self.program, run, self.deadline)
        except BaseException:  # a signal stopped fix while this run started (it waits for the fork server)
            scratch.remove(_workdir_path(run))
            raise
        if handle is None:  # the fork server was still starting when the budget ran out
            scratch.remove(run.workdir)
            run.skipped = _OUT_OF_BUDGET
            on_done(run)
            return False
        self.running.append(_Running(run, handle, time.time(), on_done))
        return True

    def is_running(self, run: TrialRun) -> bool:
        return any(item.run is run for item in self.running)

    def step(self, pause_s: float = 0.05) -> list[TrialRun]:
        """Wait ``pause_s``, then reap what ended (or stop what is past the deadline): those runs."""
        time.sleep(pause_s)
        ended = []
        for item in list(self.running):
            if item not in self.running:  # dropped by an earlier one's on_done (a guess it made useless)
                continue
            returncode = self.starter.poll(item.handle)
            timed_out = False
            if returncode is None:
                if time.time() < self.deadline:
                    continue
                returncode = self.starter.stop(item.handle)
                timed_out = True
            run = item.run
            run.wall_s = time.time() - item.started
            self.starter.finish(run, returncode, run.wall_s)
            scratch.remove(run.workdir)
            _read(run, timed_out=timed_out)
            if run.rename_to is not None:
                rename(run, run.rename_to)
            self.running.remove(item)
            ended.append(run)
            item.on_done(run)
        return ended

    def when_done(self, run: TrialRun, on_done: Callable[[TrialRun], None]) -> None:
        """What to call when ``run`` (in flight) ends, instead of what it was started with."""
        for item in self.running:
            if item.run is run:
                item.on_done = on_done

    def drop(self, run: TrialRun) -> None:
        """Stop ``run`` if it still runs, and remove what it wrote (a trial started early that
        the final selection does not want: no row, not counted)."""
        for item in list(self.running):
            if item.run is run:
                self.starter.stop(item.handle)
                self.running.remove(item)
        discard(run)

    def close(self) -> None:
        """Stop every run still in flight."""
        for item in self.running:
            self.starter.stop(item.handle)
            scratch.remove(item.run.workdir)
        self.running.clear()


def rename(run: TrialRun, name: str) -> None:
    """Give an ended run the name the final selection numbered it by (its capture, output
    files), so the document reads as if it had been started under that name."""
    target = TrialRun(name, run.actions, run.out_dir)
    _clear(target)
    stem, new = os.path.join(run.out_dir, run.name), os.path.join(run.out_dir, name)
    for suffix in (".dynscope", ".dynscope-wal", ".dynscope-shm", ".stdout", ".stderr"):
        if os.path.lexists(stem + suffix):
            os.replace(stem + suffix, new + suffix)
    run.name, run.rename_to = name, None


def discard(run: TrialRun) -> None:
    """Remove an ended run that turned out not to be wanted (an early trial the final selection
    does not take, a run made beside another on a guess): its files go, and it is not counted."""
    scratch.remove(run.workdir)
    _clear(run)


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


def new_file(path: str) -> BinaryIO:
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
    """The command recorded in the run's capture: what would record the same run by hand."""
    return ["dynscope", "explain", "-q", *(["--profile"] if run.profile else []), "-o", run.capture,
            *program_argv(program)]


def child_spec(program: Program, run: TrialRun, *, keep_caches: bool = True) -> ChildSpec:
    """The run's recording child: the remedies as its extension; the caches on (the runs' shared
    private directory is the Starter's) unless every run records with them off."""
    return ChildSpec(program, run.capture, tuple(_explain_argv(program, run)), keep_caches=keep_caches,
                     profile=run.profile, workdir=run.workdir,
                     extensions=(TrialRemedies(tuple(run.actions)).extension(),))


class Starter:
    """Starts each run's recording child: forked from the runner's fork server, which has
    imported torch once (on CUDA builds too: it creates no CUDA context), or a fresh process
    where it cannot fork; this side records how each run ended, as ``explain`` does. Every run
    uses one private cache directory, removed by ``close()``: shared with the caches on, or with
    ``cold`` the caches off in every run (each stage recorded; no run reuses another's work)."""

    def __init__(self, log_path: str, *, fork: bool = True, cold: bool = False) -> None:
        self._log = new_file(log_path)
        self._caches = SharedCacheDir("fix")
        self._keep_caches = not cold
        self.runs = ProgramRuns(self._log.fileno(), fork=fork, preload=(TRIAL_EXTENSION,), cache_dir=self._caches.path)

    def start(self, program: Program, run: TrialRun, deadline: float) -> RunHandle | None:
        """None: not started by ``deadline`` (the fork server was still starting)."""
        run.requested_at = time.time()
        with new_file(os.path.join(run.out_dir, f"{run.name}.stdout")) as stdout, \
                new_file(os.path.join(run.out_dir, f"{run.name}.stderr")) as stderr:
            handle = self.runs.start(child_spec(program, run, keep_caches=self._keep_caches), stdout=stdout.fileno(),
                                     stderr=stderr.fileno(),
                                     cwd=run.cwd, deadline=deadline)
        if handle is not None:
            run.pid = handle.pid
        return handle

    def poll(self, handle: RunHandle) -> int | None:
        return self.runs.poll(handle)

    def stop(self, handle: RunHandle) -> int:
        return self.runs.stop(handle)

    def finish(self, run: TrialRun, returncode: int, wall_s: float) -> None:
        finish_capture(run.capture, returncode, wall_s)

    def close(self) -> None:
        self.runs.close()
        self._log.close()
        self._caches.remove()


SERVER_LOG = "fork-server.log"


def starter_for(out_dir: str) -> Starter:
    """Forked runs where fork exists (POSIX), else one fresh process per run
    (``DYNSCOPE_FIX_NO_FORK=1`` asks for fresh processes: a way to compare the two); the runs
    share their compile caches (``DYNSCOPE_FIX_COLD_TRIALS=1`` runs each with the caches off, as
    fix did before: a way to compare the two, bench/fix.py --cold-trials)."""
    fork = hasattr(os, "fork") and os.environ.get("DYNSCOPE_FIX_NO_FORK") != "1"
    cold = os.environ.get("DYNSCOPE_FIX_COLD_TRIALS") == "1"
    return Starter(os.path.join(out_dir, SERVER_LOG), fork=fork, cold=cold)


def _relocation(actions: list[Action]) -> Relocate:
    """Lines of the changed text a run ran (source rewrites, a --patch) mapped back to the lines of
    the files on disk, so a break the change did not touch keeps its key though lines moved."""
    maps: dict[str, dict[int, int]] = {}
    for action in actions:
        if isinstance(action, ChangeSource):
            for path, new in action.files:
                try:
                    with open(path, encoding="utf-8", newline="") as f:
                        maps[os.path.realpath(path)] = line_map(f.read(), new)
                except (OSError, UnicodeDecodeError):
                    continue

    def relocate(file: str | None, line: int | None) -> int | None:
        if not maps or file is None or line is None:
            return line
        mapped = maps.get(os.path.realpath(file))
        return line if mapped is None else mapped.get(line, line)
    return relocate


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
            problems = fix_problems(view, _relocation(run.actions))
            metrics = metrics_of(view, program_seconds(capture))
            ended = capture.run
            outputs = trial_outputs(capture)
            run.features = trial_features(capture)
            applied = applied_actions(capture)
            run.compiled = bool(view.compiles)
            started_at = program_started_at(capture)
    except (DynscopeError, OSError):
        run.facts = RunFacts(False, None, None, stdout, None, {}, (), timed_out=timed_out)
        return
    if started_at is not None and run.requested_at is not None:
        run.startup_s = started_at - run.requested_at
    notes = tuple(f"{a.OP} did not apply" for i, a in enumerate(run.actions) if i not in applied)
    run.problems = problems
    run.torch_version = ended.torch_version
    run.facts = RunFacts(True, ended.exit_code, ended.signal, stdout, metrics, problem_counts(problems),
                         tuple(outputs), notes, timed_out)
