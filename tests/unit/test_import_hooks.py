"""when_imported: a probe installs itself when the program imports a module, never before."""

from __future__ import annotations

import sys

import pytest

from dynscope.import_hooks import when_imported


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A fresh package `hooked_pkg` with a submodule `heavy` that counts its executions."""
    root = tmp_path / "hooked_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "heavy.py").write_text("import builtins\nbuiltins.heavy_runs = getattr(builtins, 'heavy_runs', 0) + 1\n"
                                   "VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "hooked_pkg.heavy"
    for name in ("hooked_pkg.heavy", "hooked_pkg"):
        sys.modules.pop(name, None)
    import builtins
    if hasattr(builtins, "heavy_runs"):
        del builtins.heavy_runs


def test_the_callback_runs_after_the_first_import_with_the_module_complete(package):
    seen = []
    undo = when_imported(package, lambda module: seen.append(module.VALUE))
    assert seen == [] and package not in sys.modules  # registering imports nothing
    import hooked_pkg.heavy  # noqa: F401
    assert seen == [42]
    sys.modules.pop(package)
    import hooked_pkg.heavy  # noqa: F401,F811  (a re-import is not a first import)
    assert seen == [42]
    undo()
    assert not any(type(f).__name__ == "_PostImportFinder" for f in sys.meta_path)


def test_an_imported_module_gets_the_callback_at_once(package):
    import hooked_pkg.heavy  # noqa: F401

    seen = []
    when_imported(package, lambda module: seen.append(module.__name__))
    assert seen == [package]


def test_undone_before_the_import_nothing_runs_and_the_import_works(package):
    seen = []
    undo = when_imported(package, seen.append)
    undo()
    import hooked_pkg.heavy

    assert seen == [] and hooked_pkg.heavy.VALUE == 42
