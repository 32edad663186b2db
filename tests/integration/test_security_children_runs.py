"""Children that import torch import nothing from the directory they work in (docs/security.md,
"Children dynscope starts"); the torch-free half is tests/unit/test_security_children.py.

The attacker plants a module for every top-level module a recording child has imported (torch and
its dependencies, dynscope's probes, fix's remedies), each writing a marker when imported, in the
directory dynscope works in: the working directory `dynscope fix` copies for its runs (forked from
the fork server, or from the suite's warm pool), and the directory `dynscope mcp` serves (its
minify tool). No marker may appear, while the user's program, the one thing run as the user's,
still imports the module beside it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO

from dynscope.agents.served import ServedDirectory
from dynscope.agents.tools import Tools

RECORDED = REPO / "tests" / "data" / "captures" / "2.13.0+cpu"

PROGRAM = textwrap.dedent("""\
    import torch

    import helper  # beside the program: python puts the program's directory first


    def step(x):
        y = torch.sin(x)
        scale = y.sum().item()  # graph break: Tensor.item(), which a remedy fixes
        return helper.plus_one(y * scale)


    print(round(float(torch.compile(step, backend="eager")(torch.ones(4)).sum()), 4))
""")

@pytest.fixture(scope="module")
def torch_child_modules() -> list[str]:
    """The top-level modules a recording child has imported once torch, the probes and fix's remedies are in."""
    code = ("import sys, json, torch, torch._dynamo, dynscope.recorder, dynscope.probes, dynscope.fix.apply\n"
            "print('MODULES' + json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/").stdout
    names = json.loads(out.rsplit("MODULES", 1)[1])
    assert {"torch", "sympy", "numpy", "json", "sqlite3"} <= set(names) and len(names) > 150
    return [n for n in names if n != "__main__"]


def plant(directory: Path, markers: Path, names: list[str]) -> None:
    """A module per name in ``directory``, each writing ``markers/NAME`` when imported (as the unit test's)."""
    directory.mkdir(parents=True, exist_ok=True)
    markers.mkdir(exist_ok=True)
    for name in names:
        if name.isidentifier():
            (directory / f"{name}.py").write_text(f"open({str(markers / name)!r}, 'w').close()\n")


def _program(directory: Path, markers: Path) -> Path:
    directory.mkdir()
    (directory / "prog.py").write_text(PROGRAM)
    (directory / "helper.py").write_text(f"open({str(markers / 'helper-beside-the-program')!r}, 'w').close()\n"
                                         "def plus_one(y):\n    return y + 1\n")
    return directory / "prog.py"


@pytest.mark.parametrize("pool", ["warm pool", "own fork server", "fresh processes"])
def test_fix_runs_in_a_scratch_copy_of_a_strangers_directory_import_nothing_from_it(
        tmp_path, torch_child_modules, pool, monkeypatch):
    """`dynscope fix ../mine/prog.py` from a directory full of planted modules: every run (baseline
    and trials: forked, or fresh processes) works in a scratch copy of it; only the program's helper
    is imported."""
    if pool != "warm pool":
        monkeypatch.delenv("DYNSCOPE_TEST_FORK_POOL", raising=False)
    if pool == "fresh processes":
        monkeypatch.setenv("DYNSCOPE_FIX_NO_FORK", "1")
    stranger, markers = tmp_path / "stranger", tmp_path / "markers"
    plant(stranger, markers, torch_child_modules)
    program = _program(tmp_path / "mine", markers)
    done = subprocess.run([*_dynscope(), "fix", "--only", "break", "-o", str(tmp_path / "fix.json"), str(program)],
                          cwd=stranger, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads((tmp_path / "fix.json").read_text())
    assert any(t["verdict"] == "fixed" for t in document["trials"]), document["trials"]
    assert sorted(p.name for p in markers.iterdir()) == ["helper-beside-the-program"]


def test_the_mcp_servers_minify_imports_nothing_from_the_served_tree(tmp_path, torch_child_modules):
    root, markers = tmp_path / "served", tmp_path / "markers"
    plant(root, markers, torch_child_modules)
    shutil.copy(RECORDED / "graph_breaks_eager.dynscope", root / "breaks.dynscope")
    tools = Tools(ServedDirectory.at(str(root)), allow_run=True)
    with pytest.raises(Exception, match="no failure found: compile 0/0 compiles and runs cleanly"):
        tools.minify("breaks.dynscope", "0/0", backend="eager")  # ran the recorded graph: nothing fails
    assert list(markers.iterdir()) == []


def _dynscope() -> list[str]:
    """How a user starts dynscope: its console script (``python -m`` would itself import from the
    directory it is started in: docs/security.md's known limits)."""
    script = Path(sys.executable).with_name("dynscope")
    return [str(script)] if script.exists() else [sys.executable, "-P", "-m", "dynscope"]


def test_minify_from_a_capture_in_a_strangers_directory_imports_nothing_from_it(tmp_path, torch_child_modules):
    """`dynscope minify --from CAPTURE` run where the capture came with planted modules: its
    detection and check workers (forked or fresh) import none of them."""
    stranger, markers = tmp_path / "stranger", tmp_path / "markers"
    plant(stranger, markers, torch_child_modules)
    shutil.copy(RECORDED / "graph_breaks_eager.dynscope", stranger / "breaks.dynscope")
    done = subprocess.run([*_dynscope(), "minify", "--from", "breaks.dynscope", "--compile", "0/0", "--backend",
                           "eager", "--out", "out"], cwd=stranger, capture_output=True, text=True, timeout=600)
    assert "no failure found: compile 0/0 compiles and runs cleanly" in done.stderr, done.stderr[-3000:]
    assert list(markers.iterdir()) == []
