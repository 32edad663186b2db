"""The pytest plugin in real pytest sessions (pytester), with real compiles (eager backend)."""

from __future__ import annotations

import pytest

TESTS = '''
import pytest
import torch

import dynscope


def breaks(x):
    x = x + 1
    print("logging")
    return x * 2


def clean(x):
    return (x + 1) * 2


@pytest.mark.dynscope(max_graph_breaks=0)
def test_breaks():
    torch.compile(breaks, backend="eager")(torch.ones(3))


@pytest.mark.dynscope(max_graph_breaks=0, max_recompiles=0)
def test_clean():
    torch.compile(clean, backend="eager")(torch.ones(3))


@pytest.mark.dynscope(max_recompiles=0)
def test_recompiles():
    f = torch.compile(clean, backend="eager", dynamic=False)
    f(torch.ones(3))
    f(torch.ones(4))


def test_fixture_sees_what_the_test_compiled(dynscope_capture):
    torch.compile(breaks, backend="eager")(torch.ones(3))
    assert [b.location.line for b in dynscope_capture.graph_breaks()] == [9]


@pytest.mark.dynscope(max_graph_breaks=1)
def test_inside_a_capture_of_its_own(tmp_path):
    with dynscope.capture(str(tmp_path / "own.dynscope")) as cap:
        torch.compile(breaks, backend="eager")(torch.ones(5))
    assert len(cap.load().graph_breaks()) == 1


def test_unmarked():
    torch.compile(breaks, backend="eager")(torch.ones(2))
'''


def test_marked_tests_fail_on_breaks_and_recompiles_with_their_places(pytester):
    pytester.makepyfile(test_compiles=TESTS)
    keep = pytester.path / "captures"
    result = pytester.runpytest_subprocess("--dynscope-dir", str(keep), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=2)
    out = result.stdout.str()
    assert "test_compiles.py::test_breaks" in out and "test_compiles.py::test_recompiles" in out
    result.stdout.fnmatch_lines([
        "*1 torch.compile graph break (at most 0 allowed):*",
        "*test_compiles.py:9: [[]GB0059[]] Failed to trace builtin operator*",
        "*1 recompile (at most 0 allowed):*",
        "*clean (test_compiles.py:13): guard failed: tensor 'x' size mismatch at index 0. expected 3, actual 4*",
    ])
    kept = sorted(p.name for p in keep.iterdir() if p.suffix == ".dynscope")
    assert len(kept) == 6 and any(name.startswith("test_compiles.py_test_clean-") for name in kept)


def test_unmarked_tests_record_nothing_without_the_option(pytester):
    pytester.makepyfile(test_plain='''
import sys

def test_plain():
    assert "torch" not in sys.modules and "dynscope.recorder" not in sys.modules
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_under_xdist_every_worker_keeps_its_tests_captures(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_compiles=TESTS)
    keep = pytester.path / "captures"
    result = pytester.runpytest_subprocess("-n", "2", "--dynscope-dir", str(keep), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(["*test_compiles.py:9: [[]GB0059[]] Failed to trace builtin operator*"])
    assert len(list(keep.glob("*.dynscope"))) == 6


# A project whose logging config names the "torch" logger: dictConfig resets every child of it, so
# torch's structured-trace logger propagates again, and the recording raises it to DEBUG.
LOGGING_CONFTEST = '''
import logging.config

logging.config.dictConfig({"version": 1, "disable_existing_loggers": False,
                           "loggers": {"torch": {"level": "WARNING", "propagate": True}}})
'''


def test_failing_tests_report_no_torch_trace_lines(pytester):
    pytester.makeconftest(LOGGING_CONFTEST)
    pytester.makepyfile(test_compiles=TESTS)
    keep = pytester.path / "captures"
    result = pytester.runpytest_subprocess("--dynscope-dir", str(keep), "-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=4, failed=2)
    out = result.stdout.str()
    assert "torch.__trace" not in out and "Captured log call" not in out
    result.stdout.fnmatch_lines(["*test_compiles.py:9: [[]GB0059[]] Failed to trace builtin operator*"])
    # the capture holds what the report left out
    from dynscope.model import Capture

    [kept] = keep.glob("test_compiles.py_test_breaks-*.dynscope")
    with Capture.open(str(kept)) as capture:
        assert [b.location.line for b in capture.graph_breaks()] == [9] and capture.compiles()


ORDER_TESTS = '''
import json
import os

import torch


def breaks(x):
    x = x + 1
    print("logging")
    return x * 2


def test_1_compiles_first():
    torch.compile(breaks, backend="eager")(torch.ones(3))


def _observe(name, capture):
    seen = {"breaks": [b.location.line for b in capture.graph_breaks()],
            "compiles": sorted(c.compile_id for c in capture.compiles())}
    with open(os.path.join(os.environ["OBSERVED"], name + ".json"), "w") as f:
        json.dump(seen, f)


def test_2_fixture(dynscope_capture):
    torch.compile(breaks, backend="eager")(torch.ones(3))
    _observe("test_2_fixture", dynscope_capture)


def test_3_compiles_again():
    torch.compile(breaks, backend="eager")(torch.ones(3))


def test_4_fixture_again(dynscope_capture):
    torch.compile(breaks, backend="eager")(torch.ones(3))
    _observe("test_4_fixture_again", dynscope_capture)
'''


def test_dynscope_capture_records_the_same_alone_after_another_test_and_under_xdist(pytester, monkeypatch):
    pytester.makepyfile(test_order=ORDER_TESTS)
    runs = {"alone": ("-k", "test_2_fixture", "-p", "no:xdist"), "after another": ("-p", "no:xdist")}
    if _has_xdist():
        runs["-n 2"] = ("-n", "2")
    observed = {}
    for label, argv in runs.items():
        folder = pytester.path / label.replace(" ", "_")
        folder.mkdir()
        monkeypatch.setenv("OBSERVED", str(folder))
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *argv)
        assert result.ret == 0, result.stdout.str()
        observed[label] = {p.stem: p.read_text() for p in folder.glob("*.json")}
    alone = observed["alone"]["test_2_fixture"]
    assert '"breaks": [9]' in alone  # the break in breaks(), recorded
    for label, seen in observed.items():
        assert all(record == alone for record in seen.values()), (label, seen, alone)
    assert len(observed["after another"]) == 2


def _has_xdist() -> bool:
    try:
        import xdist  # noqa: F401
    except ImportError:
        return False
    return True
