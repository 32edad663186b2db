"""Installed libraries fix may rewrite: a site-packages lent through a .pth file counts (a venv layered on a
shared one, as this project's worktrees are), so a break inside such a library gets its rewrites."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from dynscope.fix.source_reader import library_dirs, reader_for


def test_a_site_packages_on_sys_path_is_a_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lent = tmp_path / "shared" / "lib" / "python3.11" / "site-packages"
    (lent / "somelib").mkdir(parents=True)
    (lent / "somelib" / "core.py").write_text("x = 1\n")
    program = tmp_path / "prog"
    program.mkdir()
    assert os.path.realpath(lent) not in library_dirs()
    monkeypatch.setattr(sys, "path", [*sys.path, str(lent)])
    assert os.path.realpath(lent) in library_dirs()
    found = reader_for(str(program))(str(lent / "somelib" / "core.py"))
    assert found is not None and found.shown == "somelib/core.py" and found.text == "x = 1\n"


def test_other_directories_on_sys_path_are_not_libraries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "src"
    elsewhere.mkdir()
    (elsewhere / "mod.py").write_text("y = 2\n")
    program = tmp_path / "prog"
    program.mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(elsewhere)])
    assert reader_for(str(program))(str(elsewhere / "mod.py")) is None
