"""pytest plugin (registered through the ``pytest11`` entry point): compile checks in tests.

- ``@pytest.mark.dynscope(max_graph_breaks=0, max_recompiles=0)``: the test fails when the code
  it runs breaks or recompiles more, naming each break's file:line and reason and each
  recompile's failed guard.
- ``dynscope_capture``: the typed model (dynscope.model.Capture) of what the test compiled so
  far; every attribute access reads the capture afresh.
- ``pytest --dynscope-dir DIR``: keep one capture per test, for the TUI and the reports, named
  after the test's node id (capture_file_name: no two tests share one, under xdist too).

Dynamo's caches are reset before each recorded test, so a test records its own compiles whatever
ran before it in the process. torch's structured trace, which the recording turns up to DEBUG,
goes into the capture only: it never reaches the test report or the project's log handlers.

Tests that use none of these pay one dictionary lookup: nothing is imported or recorded.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from typing import Any

import pytest

_MARKER = "dynscope"
_LIMITS = ("max_graph_breaks", "max_recompiles")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dynscope")
    group.addoption("--dynscope-dir", metavar="DIR", default=None,
                    help="record what torch.compile does in every test into DIR/<test id>-<hash>.dynscope")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{_MARKER}(max_graph_breaks=None, max_recompiles=None): fail the test when the code it "
                   "runs has more torch.compile graph breaks or recompiles than allowed")
    keep_dir = config.getoption("dynscope_dir")
    if keep_dir is not None:
        _check_keep_dir(keep_dir)


def _check_keep_dir(keep_dir: str) -> None:
    """A --dynscope-dir that cannot hold captures is one usage error now, not one traceback per test."""
    if os.path.lexists(keep_dir) and not os.path.isdir(keep_dir):
        raise pytest.UsageError(f"--dynscope-dir {keep_dir}: not a directory")
    try:
        os.makedirs(keep_dir, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".dynscope-write-check-", dir=keep_dir)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise pytest.UsageError(f"--dynscope-dir {keep_dir}: cannot write there ({e.strerror})") from None


@pytest.fixture(autouse=True)
def _dynscope_recording(request: pytest.FixtureRequest):
    marker = request.node.get_closest_marker(_MARKER)
    keep_dir = request.config.getoption("dynscope_dir")
    if marker is None and keep_dir is None and "dynscope_capture" not in request.fixturenames:
        yield None
        return
    from dynscope.probes import compat
    from dynscope.recorder import Recorder

    if marker is not None:
        _check_marker(marker)
    # A function an earlier test compiled would run from Dynamo's cache and record nothing (or its
    # cache entries would add recompiles): every recorded test starts from empty caches, so its
    # capture is the same alone, after other tests, or on any xdist worker.
    compat.reset_dynamo()
    from dynscope.errors import DynscopeError
    from dynscope.runner.launcher import exclusive_writer

    with ExitStack() as cleanup:
        if keep_dir is not None:
            path = os.path.join(keep_dir, capture_file_name(request.node.nodeid))
        else:  # a private directory: nobody else can put a file (or a link) where the capture goes
            scratch = tempfile.mkdtemp(prefix="dynscope-pytest-")
            cleanup.callback(shutil.rmtree, scratch, ignore_errors=True)
            path = os.path.join(scratch, "test.dynscope")
        # The writer's lock: another process recording the same test (``--dist each``, a second
        # session on the same directory) is refused instead of mixing its compiles into this file.
        try:
            cleanup.enter_context(exclusive_writer(path))
            recorder = Recorder(path, command=["pytest", request.node.nodeid]).start()
        except DynscopeError as e:  # the directory went away mid-session, another run holds the file...
            pytest.fail(f"dynscope: {e}", pytrace=False)
        request.node.stash[_PATH] = path
        try:
            yield path
        finally:
            recorder.stop(exit_code=0)


@pytest.fixture
def dynscope_capture(_dynscope_recording: str) -> Iterator[CaptureHandle]:
    handle = CaptureHandle(_dynscope_recording)
    yield handle
    handle.close()


class CaptureHandle:
    """The test's capture as the typed model: ``dynscope_capture.graph_breaks()`` and the rest
    of dynscope.model.Capture, read afresh at each access (the test is still compiling)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._capture = None

    def load(self):
        from dynscope.model import Capture

        self.close()
        self._capture = Capture.open(self.path)
        return self._capture

    def close(self) -> None:
        if self._capture is not None:
            self._capture.close()
            self._capture = None

    def __getattr__(self, name: str):
        return getattr(self.load(), name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    result = yield
    marker = item.get_closest_marker(_MARKER)
    path = item.stash.get(_PATH, None)
    if marker is not None and path is not None:
        problems = _over_limits(path, marker.kwargs)
        if problems:
            from dynscope.safe_text import visible

            pytest.fail(visible("\n".join(problems)), pytrace=False)
    return result


_PATH = pytest.StashKey[str]()


def _check_marker(marker: pytest.Mark) -> None:
    unknown = set(marker.kwargs) - set(_LIMITS)
    if marker.args or unknown:
        raise pytest.UsageError(f"@pytest.mark.dynscope takes only {', '.join(_LIMITS)} "
                                f"(got {', '.join(map(repr, marker.args)) or ', '.join(sorted(unknown))})")


def _over_limits(path: str, limits: Mapping[str, Any]) -> list[str]:
    from dynscope.analysis.names import first_line, friendly_function, location
    from dynscope.model import Capture

    with Capture.open(path) as capture:
        cwd = capture.run.cwd
        breaks, recompiles = capture.graph_breaks(), capture.recompiles()
        problems = []
        limit = limits.get("max_graph_breaks")
        if limit is not None and len(breaks) > limit:
            problems.append(f"{len(breaks)} torch.compile graph break{'s' * (len(breaks) != 1)} "
                            f"(at most {limit} allowed):")
            problems += [f"  {location(b.location.file, b.location.line, cwd)}: "
                         f"{'[' + b.gb_id + '] ' if b.gb_id else ''}{first_line(b.headline)}" for b in breaks]
        limit = limits.get("max_recompiles")
        if limit is not None and len(recompiles) > limit:
            problems.append(f"{len(recompiles)} recompile{'s' * (len(recompiles) != 1)} (at most {limit} allowed):")
            for r in recompiles:
                failure = r.failures[0] if r.failures else None
                guard = failure.guard if failure and failure.guard else first_line(r.reason)
                problems.append(f"  {friendly_function(r.function)} ({location(r.file, r.line, cwd)}): "
                                f"guard failed: {guard}")
    return problems


def capture_file_name(nodeid: str) -> str:
    """``<readable name>-<hash>.dynscope``: the name is the node id with everything but letters,
    digits, ``_``, ``.`` and ``-`` turned into ``_`` (so ``test[a b]`` and ``test[a_b]`` read
    alike), and the hash is of the exact node id, so no two tests share a file."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_.")[:_MAX_READABLE] or "test"
    digest = hashlib.blake2b(nodeid.encode("utf-8", "surrogatepass"), digest_size=5).hexdigest()
    return f"{readable}-{digest}.dynscope"


# Keeps the whole file name well under the 255 bytes most file systems allow.
_MAX_READABLE = 150

