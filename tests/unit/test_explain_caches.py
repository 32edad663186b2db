"""explain's cache choice (no torch): the caches as the user has them by default; --cold with
the caches off in a private directory that exists for the run and is gone after; --keep-caches
accepted with one line. The launch is replaced by one that records the spec it is given."""

from __future__ import annotations

import os

import pytest

from dynscope.commands import main
from dynscope.runner import launcher
from dynscope.runner.launcher import RunResult
from dynscope.runner.spec import ChildSpec


@pytest.fixture
def launched(monkeypatch, tmp_path):
    specs: list[tuple[ChildSpec, bool]] = []  # (spec, whether its cache directory existed during the run)

    def launch(spec: ChildSpec, **_kwargs) -> RunResult:
        specs.append((spec, spec.cache_dir is not None and os.path.isdir(spec.cache_dir)))
        return RunResult(spec.capture, 0, capture_written=False)

    monkeypatch.setattr(launcher, "launch", launch)
    (tmp_path / "prog.py").write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)
    return specs


def test_explain_keeps_the_users_caches_by_default(launched, capsys):
    assert main(["explain", "-o", "run.dynscope", "prog.py"]) == 0
    [(spec, _)] = launched
    assert spec.keep_caches and spec.cache_dir is None  # the user's own directory, caches on
    assert "--keep-caches" not in capsys.readouterr().err


def test_cold_turns_the_caches_off_in_a_private_directory_removed_after(launched):
    assert main(["explain", "--cold", "-o", "run.dynscope", "prog.py"]) == 0
    [(spec, existed)] = launched
    assert not spec.keep_caches and spec.cache_dir is not None
    assert existed and os.path.basename(spec.cache_dir).startswith("dynscope-cold-caches-")
    assert not os.path.exists(spec.cache_dir)


def test_keep_caches_is_accepted_with_one_line(launched, capsys):
    assert main(["explain", "--keep-caches", "-o", "run.dynscope", "prog.py"]) == 0
    [(spec, _)] = launched
    assert spec.keep_caches and spec.cache_dir is None
    notes = [line for line in capsys.readouterr().err.splitlines() if "--keep-caches" in line]
    assert notes == ["dynscope: --keep-caches is the default now (--cold records every stage with the caches off)"]


@pytest.mark.parametrize("other", ["--warm", "--keep-caches"])
def test_cold_with_a_flag_that_keeps_caches_is_one_line(launched, capsys, other):
    assert main(["explain", "--cold", other, "-o", "run.dynscope", "prog.py"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dynscope: --cold turns the caches off; it cannot go with {other}"]
    assert launched == []
