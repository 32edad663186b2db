"""Every child dynscope starts imports nothing from the directory it works in (docs/security.md,
"Children dynscope starts"), without torch.

A stranger's tree (the directory `dynscope mcp` serves, a tarball a capture came in, a fix run's
scratch copy, a recorded run's directory) can hold a module named like one dynscope imports. The
attacker plants one for every module a dynscope child imports (the names are read from a real
child's sys.modules, plus the ones python imports at startup), each writing a marker when
imported, and the child must run without writing one. Children that import torch (fix's trials,
minify's workers, the MCP server's minify) are in tests/integration/test_security_children_runs.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hostile_views import RECORDED

from dynscope.runner.fork_client import ForkServer
from dynscope.runner.interpreter import child_environment, module_command, without_directories

CAPTURE = RECORDED / "graph_breaks_eager.dynscope"
# What python imports at startup from the import path, and what dynscope's children import that a
# summary does not (the names a torch child adds are planted by the integration test).
_STARTUP = ["sitecustomize", "usercustomize", "readline", "rlcompleter"]
_MORE = ["torch", "numpy", "sympy", "jinja2", "rich", "textual", "libcst", "mcp", "typing_extensions", "filelock",
         "networkx", "fsspec", "dynscope", "minifier", "reporters", "tui"]


def _child_module_names() -> list[str]:
    """The top-level modules a `dynscope summary` child has imported when it ends."""
    code = ("import runpy, sys, json\nsys.argv = ['dynscope', 'summary', '--json', sys.argv[1]]\n"
            "try:\n    runpy.run_module('dynscope', run_name='__main__', alter_sys=True)\nexcept SystemExit:\n    pass\n"
            "print('MODULES' + json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code, str(CAPTURE)], capture_output=True, text=True, check=True).stdout
    return json.loads(out.rsplit("MODULES", 1)[1])


def plant(directory: Path, markers: Path, names: list[str] | None = None) -> list[str]:
    """A module per name in ``directory``, each of which writes ``markers/NAME`` when imported."""
    names = names if names is not None else sorted({*_child_module_names(), *_STARTUP, *_MORE} - {"__main__"})
    directory.mkdir(parents=True, exist_ok=True)
    markers.mkdir(exist_ok=True)
    for name in names:
        if not name.isidentifier():
            continue
        (directory / f"{name}.py").write_text(f"open({str(markers / name)!r}, 'w').close()\n")
    return names


@pytest.fixture
def planted(tmp_path) -> tuple[Path, Path, list[str]]:
    names = plant(tmp_path / "stranger", tmp_path / "markers")
    return tmp_path / "stranger", tmp_path / "markers", names


def test_the_planted_names_cover_what_a_dynscope_child_imports(planted):
    _, _, names = planted
    assert len(names) > 100  # the stdlib and dependencies a summary imports, and python's startup hooks
    for name in ("json", "argparse", "sqlite3", "typing", "rich", "re", "zlib", "sitecustomize", "torch", "libcst"):
        assert name in names


def test_a_child_with_its_directory_on_sys_path_would_import_them_the_control(tmp_path):
    """The attack works on a child started without the prelude (the working directory on sys.path,
    as the old `python -m dynscope...` children had it): the test can fail."""
    stranger, markers = tmp_path / "stranger", tmp_path / "markers"
    plant(stranger, markers, ["json", "argparse"])
    old = ("import runpy, sys; sys.argv = ['dynscope', 'summary', '--json', sys.argv[1]]; "
           "runpy.run_module('dynscope', run_name='__main__', alter_sys=True)")
    subprocess.run([sys.executable, "-c", old, str(CAPTURE)], cwd=stranger, capture_output=True, timeout=120)
    assert "argparse" in {p.name for p in markers.iterdir()}


def test_python_dash_m_dynscope_takes_its_directory_off_sys_path(planted):
    """`python -m dynscope` (how agents start `dynscope mcp`, and the tests): the package drops the
    directory python put first before it imports anything but os and sys. (A dynscope.py there is
    what `python -m dynscope` runs, as for any `python -m NAME`: not planted here; the console
    script `dynscope` has no such entry.)"""
    stranger, markers, _ = planted
    (stranger / "dynscope.py").unlink()
    done = subprocess.run([sys.executable, "-m", "dynscope", "summary", "--json", str(CAPTURE)], cwd=stranger,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in markers.iterdir()) == []


def test_a_dynscope_child_in_a_strangers_directory_imports_nothing_from_it(planted, monkeypatch):
    """The command line every child dynscope runs (the MCP server's, the fork server, minify's
    workers and verifier): no marker, and the child still works. PYTHONPATH with an empty and a
    relative entry (`export PYTHONPATH=$PYTHONPATH:lib` with none set) names the parent's
    directory, not the child's: the planted sitecustomize.py is not run at startup either."""
    stranger, markers, _ = planted
    monkeypatch.setenv("PYTHONPATH", os.pathsep + "lib")
    done = subprocess.run([*module_command("dynscope"), "summary", "--json", str(CAPTURE)], cwd=stranger,
                          env=child_environment(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["schema"] == "dynscope.summary/1"
    assert sorted(p.name for p in markers.iterdir()) == []


def test_the_environment_a_child_gets_names_the_parents_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", "lib", "/abs/site"]))
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", ".pycache")
    monkeypatch.setenv("PYTHONUSERBASE", "user")
    env = child_environment()
    here = str(tmp_path)
    assert env["PYTHONPATH"].split(os.pathsep) == [here, f"{here}/lib", "/abs/site"]
    assert env["PYTHONPYCACHEPREFIX"] == f"{here}/.pycache" and env["PYTHONUSERBASE"] == f"{here}/user"
    monkeypatch.setenv("PYTHONPATH", "")  # python reads an empty one as none: it stays so
    assert child_environment()["PYTHONPATH"] == ""


def test_a_working_directory_is_never_kept_on_a_childs_path_but_dynscopes_own(tmp_path):
    import dynscope

    own = os.path.dirname(os.path.dirname(os.path.abspath(dynscope.__file__)))
    kept = without_directories(["", "rel", str(tmp_path), "/usr/lib/python3", own], [str(tmp_path), own])
    assert kept == ["/usr/lib/python3", own]


def test_a_source_checkout_run_from_elsewhere_still_finds_its_own_dynscope(tmp_path):
    """The prelude puts dynscope's own install location first where python would find no dynscope
    or another one: a child of a checkout is that checkout's dynscope."""
    import dynscope

    other = tmp_path / "site" / "dynscope"  # another, older dynscope on PYTHONPATH
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("raise SystemExit('the wrong dynscope')\n")
    probe = tmp_path / "probe"
    probe.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run([*module_command("dynscope"), "--version"], cwd=probe, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert dynscope.__version__ in done.stdout + done.stderr


_SERVER = r"""
import json, os, socket, sys, types
def module(name, main):
    m = types.ModuleType(name); m.main = main; sys.modules[name] = m
def imports():
    import difflib, tabnanny  # not imported by the server: looked up on the child's sys.path
    print(json.dumps({"cwd": os.getcwd(), "path": sys.path}), flush=True)
module("dynscope._t.imports", imports)
from dynscope.runner.fork_server import _Server
sock = socket.socket(fileno=int(sys.argv[1]))
server = _Server(sock, None)
sock.sendall(json.dumps({"ready": True, "why": "stand-in", "gpu": False}).encode() + b"\n")
server.serve()
"""


def test_a_forked_child_imports_nothing_from_the_servers_directory_or_its_own(tmp_path, monkeypatch):
    """A fork server started in one stranger's directory (`python -c` puts it first) forks a child
    into another: neither is on the child's sys.path, and its imports find the real modules."""
    markers = tmp_path / "markers"
    plant(tmp_path / "server-dir", markers, ["difflib", "tabnanny"])
    plant(tmp_path / "child-dir", markers, ["difflib", "tabnanny"])
    monkeypatch.chdir(tmp_path / "server-dir")
    env_path = textwrap.dedent(str(Path(__file__).resolve().parents[2]))  # dynscope's checkout, for the stand-in
    monkeypatch.setenv("PYTHONPATH", env_path)
    with open(tmp_path / "server.log", "wb") as log:
        server = ForkServer(log.fileno(), command=[sys.executable, "-c", _SERVER])
        try:
            with open(tmp_path / "c.out", "wb") as out, open(os.devnull, "rb") as devnull:
                child = server.spawn("dynscope._t.imports", "", stdin=devnull.fileno(), stdout=out.fileno(),
                                     stderr=log.fileno(), cwd=str(tmp_path / "child-dir"))
            assert server.wait(child, timeout=60) == 0, (tmp_path / "server.log").read_text()
        finally:
            server.close()
    seen = json.loads((tmp_path / "c.out").read_text())
    assert seen["cwd"] == str(tmp_path / "child-dir")
    assert "" not in seen["path"] and not any(p.startswith(str(tmp_path)) for p in seen["path"])
    assert list(markers.iterdir()) == []


@pytest.mark.parametrize("setting", ["PYTHONSAFEPATH=1", "PYTHONSTARTUP=startup.py", "PYTHONPATH=.",
                                     "PYTHONPYCACHEPREFIX=cache"])
def test_python_settings_in_the_environment_do_not_reopen_the_door(planted, monkeypatch, setting):
    """The user's PYTHON* settings pass through to children as python reads them, never naming the
    child's directory: PYTHONSAFEPATH leaves the standard library alone, PYTHONSTARTUP is never read
    (a child is not interactive), a relative PYTHONPATH or PYTHONPYCACHEPREFIX names the parent's
    directory (a .pyc planted under the child's cache prefix is never loaded)."""
    stranger, markers, _ = planted
    (stranger / "startup.py").write_text(f"open({str(markers / 'startup')!r}, 'w').close()\n")
    _plant_unchecked_pyc(stranger / "cache", "argparse", markers)
    name, value = setting.split("=")
    parent = stranger.parent / "parent"
    parent.mkdir()
    monkeypatch.chdir(parent)
    monkeypatch.setenv(name, value)
    done = subprocess.run([*module_command("dynscope"), "summary", "--json", str(CAPTURE)], cwd=stranger,
                          env=child_environment(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert list(markers.iterdir()) == []


def test_graphviz_is_never_found_in_the_directory_dynscope_runs_in(tmp_path, monkeypatch):
    """`PATH=:/usr/bin` (an empty entry: the current directory) and a program called dot planted there."""
    from dynscope.analysis.dot import render_image
    from dynscope.errors import DynscopeError

    planted_dot = tmp_path / "dot"
    planted_dot.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\necho '<svg/>'\n")
    planted_dot.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", os.pathsep + "." + os.pathsep + os.environ.get("PATH", ""))
    try:
        render_image("digraph { a -> b }", "svg")
    except DynscopeError as e:
        assert "not installed" in str(e)
    assert not (tmp_path / "ran").exists()


def _plant_unchecked_pyc(prefix: Path, module: str, markers: Path) -> None:
    """A .pyc for a standard module where PYTHONPYCACHEPREFIX=prefix would look, marked "unchecked
    hash-based" (PEP 552): python loads it without looking at the source."""
    import argparse
    import importlib.util
    import marshal

    source = Path(argparse.__file__).with_name(f"{module}.py")
    where = prefix / str(source.parent).lstrip("/")
    where.mkdir(parents=True, exist_ok=True)
    code = compile(f"open({str(markers / 'pyc')!r}, 'w').close()", str(source), "exec")
    header = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + b"\0" * 8
    (where / f"{module}.{sys.implementation.cache_tag}.pyc").write_bytes(header + marshal.dumps(code))


def test_a_relative_pycache_prefix_would_load_a_planted_pyc_the_control(tmp_path):
    """Without child_environment, PYTHONPYCACHEPREFIX=cache names the child's directory: the test can fail."""
    stranger, markers = tmp_path / "stranger", tmp_path / "markers"
    plant(stranger, markers, [])
    _plant_unchecked_pyc(stranger / "cache", "argparse", markers)
    subprocess.run([*module_command("dynscope"), "--version"], cwd=stranger,
                   env={**os.environ, "PYTHONPYCACHEPREFIX": "cache"}, capture_output=True, timeout=120)
    assert [p.name for p in markers.iterdir()] == ["pyc"]


def test_a_fresh_childs_spec_of_megabytes_is_handed_over_by_descriptor(tmp_path):
    """One command-line argument is at most 128 KiB on Linux (E2BIG), and a spec can carry a patch's
    changed source: a fresh recording child reads its spec from an inherited descriptor. Here the
    spec (2 MB) names an unknown program kind: the child read all of it, and says so in one line."""
    from dynscope.runner.launcher import child_command
    from dynscope.runner.program import Program
    from dynscope.runner.spec import ChildSpec

    text = json.dumps({"program": {"kind": "bogus", "target": "x" * 2_000_000}, "capture": "c"})
    with open(tmp_path / "spec", "w+b") as handed:
        handed.write(text.encode())
        handed.flush()
        handed.seek(0)
        argv = child_command(ChildSpec(Program("script", "p.py"), "c", ()), spec_fd=handed.fileno())
        done = subprocess.run(argv, pass_fds=[handed.fileno()], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
    assert len(argv[-1]) < 16 and argv[-1].startswith("fd:")
    assert done.returncode == 2 and done.stderr == "dynscope: unknown program kind 'bogus'\n", done.stderr
