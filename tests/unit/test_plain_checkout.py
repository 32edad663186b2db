"""A plain checkout runs without an install, and without its dependencies says so in one line.

The checkout's top-level tui/, reporters/ and minifier/ are dynscope.tui, .reporters and
.minifier through the install's package-dir mapping, and in a checkout through the links
dynscope/tui, dynscope/reporters and dynscope/minifier (which also let mypy see one package).
The test copies the checkout's packages, links kept, to a fresh directory and runs
`python -m dynscope` there with the editable install's finder taken out, as on a machine where
dynscope was never installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "data" / "captures" / "2.13.0+cpu" / "graph_breaks_eager.dynscope"

# python -m dynscope with every finder of an editable install removed first
_UNINSTALLED = (
    "import runpy, sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in getattr(f, '__module__', '')]\n"
    "sys.path_hooks[:] = [h for h in sys.path_hooks if '__editable__' not in getattr(h, '__module__', '')]\n"
    "sys.path_importer_cache.clear()\n"
    "sys.argv = ['dynscope', *sys.argv[1:]]\n"
    "runpy.run_module('dynscope', run_name='__main__', alter_sys=True)\n"
)


def _checkout(tmp_path: Path) -> Path:
    for folder in ("dynscope", "tui", "reporters", "minifier"):
        shutil.copytree(ROOT / folder, tmp_path / folder, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_a_plain_checkout_runs_its_commands(tmp_path):
    checkout = _checkout(tmp_path)
    result = subprocess.run([sys.executable, "-c", _UNINSTALLED, "summary", "--json", str(CAPTURE)],
                            cwd=checkout, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert '"schema": "dynscope.summary/' in result.stdout
    # the packages came from the checkout, not from an install
    probe = subprocess.run([sys.executable, "-c", _UNINSTALLED.replace(
        "runpy.run_module('dynscope', run_name='__main__', alter_sys=True)",
        "import dynscope.reporters, dynscope.tui, dynscope.minifier as m; print(m.__file__)")],
        cwd=checkout, capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == str(checkout / "dynscope" / "minifier" / "__init__.py"), probe.stderr


def test_a_missing_dependency_is_one_line_saying_to_install(tmp_path):
    checkout = _checkout(tmp_path / "checkout")
    # a Python with nothing installed: a fresh venv of the base interpreter, without pip
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True, timeout=120)
    bare = tmp_path / "bare" / "bin" / "python"
    if subprocess.run([bare, "-c", "import rich"], capture_output=True).returncode == 0:
        pytest.skip("the base interpreter has rich installed: no Python without it here")
    result = subprocess.run([bare, "-m", "dynscope", "summary", str(CAPTURE)], cwd=checkout,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "dynscope: the package 'rich' is not installed: install dynscope first (`pip install -e .` in its checkout)"]


def test_a_dependency_only_one_command_needs_is_asked_for_by_that_command(tmp_path):
    """Without textual (a machine with the readers' dependencies only), the summary works and the
    TUI says in one line what is missing."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class NoTextual:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'textual' or name.startswith('textual.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoTextual())\n")
    env = {**os.environ, "PYTHONPATH": str(blocker)}
    summary = subprocess.run([sys.executable, "-m", "dynscope", "summary", str(CAPTURE)], capture_output=True,
                             text=True, timeout=60, env=env)
    assert summary.returncode == 0 and "graph breaks" in summary.stdout, summary.stderr
    tui = subprocess.run([sys.executable, "-m", "dynscope", "tui", str(CAPTURE)], capture_output=True, text=True,
                         timeout=60, env=env)
    assert tui.returncode == 1
    assert tui.stderr.strip().splitlines() == [
        "dynscope: the package 'textual' is not installed: install dynscope first (`pip install -e .` in its checkout)"]
