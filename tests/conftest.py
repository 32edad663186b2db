"""Shared fixtures: real captures made by running `dynscope explain` on the examples.

Compiling on CPU is slow, so each (example, arguments) capture is made once per test
session and shared; tests must treat capture files as read-only.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

# pytester runs the pytest plugin's tests in their own pytest sessions (tests/integration/test_pytest_plugin.py).
pytest_plugins = ("pytester",)

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

# Test-only settings (CONTRIBUTING.md, "Test-only settings"), set here, before any test module
# imports torch and before xdist starts its workers, so every process and run of the session
# inherits them.
# Inductor's kernel builds stay in one cache directory for the session instead of a fresh one per
# compile: every stage still runs and is recorded, but gcc does not build the same kernels and
# precompiled header again in each of the suite's compiles. The directory is this session's
# (made by the process that loads this file first: the xdist controller), unless the caller set one.
# The knob names that directory, so that a run in a private cache directory (explain --cold)
# keeps its kernel builds there too.
_SESSION_INDUCTOR_CACHE: str | None = None
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _SESSION_INDUCTOR_CACHE = tempfile.mkdtemp(prefix="dynscope-tests-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _SESSION_INDUCTOR_CACHE
os.environ.setdefault("DYNSCOPE_TEST_KEEP_KERNEL_BUILDS", os.environ["TORCHINDUCTOR_CACHE_DIR"])
# Inductor compiles in the process that compiles, not in a pool of worker processes (one per
# core) that each start by importing torch: xdist's two workers already keep both cores busy.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
# Inductor takes the vector instruction sets the CPU lists, without first building a test library
# for each and loading it in a fresh python (about 0.2 s of CPU, 204 times in the integration layer).
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
# This python's commands (dynscope, python) first on PATH, as in an activated venv: the README's
# commands call them by name (test_readme_usage.py). And no test downloads a model.
_BIN = str(Path(sys.executable).parent)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _BIN:
    os.environ["PATH"] = os.pathsep.join([_BIN, *filter(None, [os.environ.get("PATH")])])
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _compile_dynscope_bytecode() -> None:
    """Write the checkout's .pyc files once, in the process that loads this file first.

    An editable install's modules are compiled on import, and with PYTHONDONTWRITEBYTECODE=1 (set
    on these machines) never written: each of the suite's ~800 dynscope processes compiled the
    modules it imports from source again (a `dynscope summary` imports 57: 0.455 s of CPU instead
    of 0.281 s, bench/cli_startup.py).
    Python still reads .pyc files it is told not to write, and checks each against its source."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller already did
    import compileall

    for package in ("dynscope", "tui", "reporters", "minifier"):  # the last three: dynscope's linked subpackages
        compileall.compile_dir(REPO / package, quiet=2)


_compile_dynscope_bytecode()


class _ForkPool:
    """The session's warm fork pool (dynscope/runner/fork_pool.py; CONTRIBUTING.md, "Test-only
    settings"): one process that imports torch once, from which every fork server and recording
    child a test's dynscope starts is forked. Started by the process that configures first (the
    xdist controller), after every other setting above (a process whose environment differs gets a
    server of its own), and only for a session that runs more than the torch-free unit layer."""

    def __init__(self) -> None:
        from dynscope.runner.fork_client import module_command
        from dynscope.runner.fork_pool import POOL_ENV

        self.directory = tempfile.mkdtemp(prefix="dynscope-tests-pool-")  # only this user may enter it
        address = os.path.join(self.directory, "pool.sock")
        os.environ[POOL_ENV] = address
        with open(os.path.join(self.directory, "pool.log"), "wb") as log:
            # stdin is its lifeline: it ends, with every server it forked, when this process closes it or dies.
            self.proc = subprocess.Popen([*module_command("dynscope.runner.fork_pool"), address],
                                         stdin=subprocess.PIPE, stdout=log, stderr=log, start_new_session=True)

    def summary(self) -> str:
        """How many fork servers it forked, and why it refused the parents it refused."""
        with open(os.path.join(self.directory, "pool.log"), errors="replace") as f:
            lines = f.read().splitlines()
        forked = sum(" forked server " in line for line in lines)
        refused = collections.Counter(line.split("refused a parent: ", 1)[1] for line in lines if "refused a parent: " in line)
        why = "; ".join(f"{n} × {reason}" for reason, n in refused.most_common())
        return f"dynscope fork pool: {forked} servers forked, {sum(refused.values())} parents refused" + (
            f" ({why})" if why else "")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


_FORK_POOL: _ForkPool | None = None


def _needs_torch(config: pytest.Config) -> bool:
    unit = REPO / "tests" / "unit"
    paths = [Path(arg.split("::")[0]).resolve() for arg in config.args] or [Path.cwd()]
    return any(not path.is_relative_to(unit) for path in paths)


def pytest_configure(config: pytest.Config) -> None:
    global _FORK_POOL
    from dynscope.runner.fork_pool import POOL_ENV

    if not os.environ.get("PYTEST_XDIST_WORKER") and POOL_ENV not in os.environ and _needs_torch(config):
        _FORK_POOL = _ForkPool()


@pytest.fixture
def no_fork_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests whose subject is how dynscope starts, signals and ends its processes: they run
    the way users' runs do, without the session's warm fork pool."""
    from dynscope.runner.fork_pool import POOL_ENV

    monkeypatch.delenv(POOL_ENV, raising=False)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _FORK_POOL is not None:
        terminalreporter.write_line(_FORK_POOL.summary())


def pytest_unconfigure(config: pytest.Config) -> None:
    if _FORK_POOL is not None:
        _FORK_POOL.close()
    if _SESSION_INDUCTOR_CACHE is not None:
        shutil.rmtree(_SESSION_INDUCTOR_CACHE, ignore_errors=True)


def run_dynscope(*args: str, cwd: str | os.PathLike | None = None, timeout: float = 600,
                 env: dict[str, str] | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI in a fresh process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "dynscope", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, input=input,
        env={**os.environ, **(env or {})},
    )


def as_a_user_runs(env: dict[str, str]) -> dict[str, str]:
    """The whole environment for a run that must behave as a user's does: ``env`` over this
    session's, without the test-only kernel-build knob (a test about what a run leaves in a cache
    directory)."""
    return {k: v for k, v in {**os.environ, **env}.items() if k != "DYNSCOPE_TEST_KEEP_KERNEL_BUILDS"}


def copy_fix_program(directory: Path) -> Path:
    """tests/programs/fix_model.py and the module it imports, copied into ``directory`` (dynscope fix tests)."""
    for name in ("fix_model.py", "fix_helpers.py"):
        shutil.copy(REPO / "tests" / "programs" / name, directory / name)
    return directory


def python_file_hashes(directory: Path) -> dict[str, str]:
    """sha256 of every .py file in ``directory``: the user's files, byte for byte, before and after a run."""
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.glob("*.py"))}


def needs_program(*names: str) -> pytest.MarkDecorator:
    """Skip a test when none of these programs is installed, except in CI (CI=true), where
    .ci/run installs them and a missing one must fail the test rather than hide it."""
    missing = not os.environ.get("CI") and not any(shutil.which(name) for name in names)
    return pytest.mark.skipif(missing, reason=f"needs {' or '.join(names)} (.ci/run installs it)")


def import_or_skip(name: str):
    """``pytest.importorskip(name)``, except in CI (CI=true), where .ci/run installs the dev
    extras and a missing module must fail the test rather than hide it."""
    if os.environ.get("CI"):
        import importlib

        return importlib.import_module(name)
    return pytest.importorskip(name)


class CaptureFactory:
    """Captures of the examples, each recorded once per test session, also under pytest-xdist:
    the workers share ``directory`` and the first to need a capture records it while the others
    wait on its lock file, then read the same file."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._made: dict[tuple[str, ...], Path] = {}

    def __call__(self, example: str, *args: str) -> Path:
        """A capture of `dynscope explain examples/<example> <args>` (made once per session)."""
        key = (example, *args)
        if key not in self._made:
            name = "-".join(a.strip("-").replace("/", "_") for a in key) + ".dynscope"
            path = self.directory / name
            with _held(self.directory / f"{name}.factory-lock"):  # not NAME.lock: the writer's own lock
                done = path.with_name(f"{name}.done")  # written only after a whole, successful run
                if not done.exists():
                    path.unlink(missing_ok=True)  # what a failed run in another worker left
                    # --cold: every stage recorded, whatever the session's caches hold
                    result = run_dynscope("explain", "--cold", "-q", "-o", str(path), str(EXAMPLES / example), *args)
                    assert result.returncode == 0, result.stderr[-4000:]
                    done.touch()
            self._made[key] = path
        return self._made[key]


@contextlib.contextmanager
def _held(lock: Path):
    """An exclusive lock between the processes of one test session (xdist workers)."""
    import fcntl

    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def make_capture(tmp_path_factory) -> CaptureFactory:
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # no xdist: this process alone
        return CaptureFactory(tmp_path_factory.mktemp("captures"))
    # Under xdist each worker has its own base temp directory; their parent is the session's.
    shared = tmp_path_factory.getbasetemp().parent / "captures"
    shared.mkdir(exist_ok=True)
    return CaptureFactory(shared)


@pytest.fixture
def small_filesystem(tmp_path):
    """A 160 KiB tmpfs, for what a full disk does (needs root, as in CI)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@contextlib.contextmanager
def explain_holding_its_capture(tmp_path: Path):
    """An `explain` run that holds ``shared.dynscope`` (tests/programs/slow_writer.py waits for a
    gate file): yields (process, capture) once the capture has content, then opens the gate and
    waits for the run. The caller checks the run's ending (``process.returncode``, its output
    in ``process.ended``)."""
    capture, gate = tmp_path / "shared.dynscope", tmp_path / "gate"
    process = subprocess.Popen([sys.executable, "-m", "dynscope", "explain", "-q", "-o", str(capture),
                                str(REPO / "tests" / "programs" / "slow_writer.py"), str(gate)],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (capture.exists() and capture.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.1)
        yield process, capture
    finally:
        gate.touch()
        process.ended = process.communicate(timeout=300)
