"""minify never executes what a capture says (issue 20, item 1): attacks on a real capture.

A real capture is recorded once (`dynscope explain` of tests/programs/minify_clean.py, eager
backend); each attack forges a copy of it (tests/unit/hostile_minify.py: the graph blob's hash
and size kept consistent, the recorded settings rewritten in place) and runs the real
`dynscope minify --from` on it. Every attack asserts: no marker file created by any payload,
one line and the documented exit code (2 for a refused capture; 0 or 1 for a minify that
ignored what it dropped, saying so), no raw control byte in the output, a bounded time, and
no file changed outside the output directory. tests/unit/test_security_minify_checks.py covers the
torch-free parts (the table, renaming, settings, the repro check) in detail.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_dynscope

sys.path.insert(0, str(REPO / "tests" / "unit"))
from hostile_minify import call, forge, node, rename, returning  # noqa: E402

from dynscope.minifier.repro_check import problem  # noqa: E402

PROGRAM = REPO / "tests" / "programs" / "minify_clean.py"
CONTROL = set(range(0, 32)) - {9, 10, 13} | {127} | set(range(0x80, 0xA0))
DYNSCOPE = Path(sys.executable).with_name("dynscope")  # the console script: its sys.path[0] is not the cwd


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("recorded") / "clean.dynscope"
    proc = run_dynscope("explain", "-q", "-o", str(path), str(PROGRAM), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return path


def minify(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """The real command, as a user runs it (the console script), in ``cwd``."""
    command = [str(DYNSCOPE)] if DYNSCOPE.exists() else [sys.executable, "-m", "dynscope"]
    return subprocess.run([*command, "minify", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def listing(directory: Path) -> dict[str, float]:
    """Every file and its modification time, but the output directory and the capture (minify
    records its result into the capture it read: README "dynscope minify")."""
    return {name: p.stat().st_mtime for p in directory.rglob("*")
            if not (name := str(p.relative_to(directory))).startswith("out") and not name.endswith(".dynscope")}


def assert_clean_output(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert not any(ord(c) in CONTROL for c in proc.stderr + proc.stdout)


def last_line(proc: subprocess.CompletedProcess) -> str:
    return proc.stderr.strip().splitlines()[-1]


def markers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("MARK*"))


# -- refused before anything runs ----------------------------------------------------------------


ATTACKS = {
    "torch.os.system": ("torch.os.system", lambda m: [f"touch {m}"]),
    "torch.builtins.exec": ("torch.builtins.exec", lambda m: [f"open({str(m)!r}, 'w').close()"]),
    "getattr chain": ("torch.nn.modules.module.torch.os.system", lambda m: [f"touch {m}"]),
    "__import__": ("builtins.__import__", lambda m: ["os"]),
    "aten.from_file": ("torch.ops.aten.from_file.default", lambda m: [str(m), True, 16]),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_hostile_target_is_refused_in_one_line(recorded, tmp_path, attack):
    target, args = ATTACKS[attack]
    marker = tmp_path / "MARK"

    def hostile(graph):
        node(graph, "sin").update(target=target, args=args(marker))
        return graph

    capture = forge(recorded, tmp_path / "bug.dynscope", graph=hostile)
    before = listing(tmp_path)
    started = time.monotonic()
    proc = minify(tmp_path, "--from", str(capture), "--compile", "0/0", "--backend", "eager")
    assert time.monotonic() - started < 120
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert last_line(proc).startswith("dynscope: compile 0/0 cannot be rebuilt from the capture: cannot rebuild node sin")
    assert_clean_output(proc)
    assert not marker.exists()
    assert listing(tmp_path) == before


# -- names, code-like strings, settings and planted modules ---------------------------------------


@pytest.mark.inductor
def test_hostile_names_strings_and_settings_never_run_nor_reach_the_repro(recorded, tmp_path):
    """The placeholder of the issue, a node name that would break out of its line, a
    code-like string constant, cpp.cxx naming ./cc.sh, and modules planted beside the capture
    and in the output directory: minify renames, drops and ignores them, writes a repro that
    passes the check, and proves it in a fresh process, without any payload running."""
    payloads = {n: f"__import__('os').system('touch {tmp_path / f'MARK{n}'}')" for n in range(1, 4)}

    def hostile(graph):
        graph = rename(graph, "l_x_", f"l_x_={payloads[1]}")
        graph = rename(graph, "sin", f"sin = {payloads[2]} #")
        sin = graph["nodes"][1]
        div = call("div", "torch.div", [{"node": sin["name"]}, 2], [sin["name"]],
                   kwargs={"rounding_mode": payloads[3]}, like=sin)  # fails: a rounding mode torch does not have
        graph["nodes"].insert(2, div)
        return returning(graph, "div", "add")

    capture = forge(recorded, tmp_path / "bug.dynscope", graph=hostile, settings={
        "torch._inductor.config": {"cpp.cxx": [None, "./cc.sh"], "fallback_random": True,
                                   "trace.enabled": True, "trace.debug_dir": str(tmp_path / "MARK_debug")}})
    (tmp_path / "cc.sh").write_text(f"#!/bin/sh\ntouch {tmp_path / 'MARK_cc'}\nexec g++ \"$@\"\n")
    (tmp_path / "cc.sh").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    for planted in (tmp_path / "json.py", out / "json.py", out / "torch.py"):
        planted.write_text(f"open({str(tmp_path / ('MARK_' + planted.parent.name + '_' + planted.stem))!r}, 'w')\n")
    before = listing(tmp_path)
    proc = minify(tmp_path, "--from", str(capture), "--compile", "0/0", "--backend", "eager", "--out", str(out),
                  timeout=600)
    assert_clean_output(proc)
    assert markers(tmp_path) == []
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "renamed 2 graph value(s)" in proc.stderr and "torch._inductor.config.cpp.cxx" in proc.stderr
    repro = (out / "repro.py").read_text()
    assert problem(repro, "repro_inputs.pt") is None
    assert "cxx" not in repro and "cc.sh" not in repro and "debug_dir" not in repro
    assert "torch._inductor.config.fallback_random = True" in repro  # an allowed setting is kept
    # Payload text survives only as the inert string constant it was recorded as.
    constants = [n.value for n in ast.walk(ast.parse(repro)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert repro.count("__import__") == 1 and any(payloads[3] in c for c in constants)
    assert payloads[1] not in repro and payloads[2] not in repro
    assert listing(tmp_path) == before


@pytest.mark.inductor
def test_a_compiler_recorded_in_a_capture_is_never_run(recorded, tmp_path):
    """The tarball of the issue: bug.dynscope records cpp.cxx = ./cc.sh beside an executable
    cc.sh, and more settings that name paths and debug output. Inductor compiles the rebuilt
    graph (cold caches, so it must invoke a C++ compiler) with the real one, and says which
    settings it did not apply. Its compiles are in minify's private cache directory (cold by
    construction), never the user's: a logging stand-in for the real compiler (CXX, which Inductor
    takes in place of g++) shows the C++ it built there, and that directory is gone after."""
    (tmp_path / "cc.sh").write_text(f"#!/bin/sh\ntouch {tmp_path / 'MARK_cc'}\nexec g++ \"$@\"\n")
    (tmp_path / "cc.sh").chmod(0o755)
    capture = forge(recorded, tmp_path / "bug.dynscope", settings={
        "torch._inductor.config": {"cpp.cxx": [None, "./cc.sh"], "cpp.march": "native -fplugin=./MARK.so",
                                   "trace.enabled": True, "trace.debug_dir": str(tmp_path / "MARK_debug"),
                                   "debug": True, "global_cache_dir": str(tmp_path / "MARK_cache")},
        "torch._dynamo.config": {"debug_dir_root": str(tmp_path / "MARK_dynamo")}})
    cache = tmp_path.parent / f"{tmp_path.name}-inductor-cache"  # the user's: minify must not touch it
    private_parent = tmp_path.parent / f"{tmp_path.name}-tmp"  # TMPDIR: where minify makes its private one
    private_parent.mkdir()
    compiler_log = tmp_path.parent / f"{tmp_path.name}-cxx.log"
    real_compiler = tmp_path.parent / f"{tmp_path.name}-cxx.sh"
    real_compiler.write_text(f"#!/bin/sh\necho \"$@\" >> {compiler_log}\nexec g++ \"$@\"\n")
    real_compiler.chmod(0o755)
    before = listing(tmp_path)
    proc = minify(tmp_path, "--from", str(capture), "--compile", "0/0", "--out", str(tmp_path / "out"),
                  env={"TORCHINDUCTOR_CACHE_DIR": str(cache), "TMPDIR": str(private_parent), "CXX": str(real_compiler)})
    assert_clean_output(proc)
    assert markers(tmp_path) == []
    assert proc.returncode == 1, proc.stderr[-3000:]
    line = last_line(proc)
    assert line.startswith("dynscope: no failure found: compile 0/0 compiles and runs cleanly with backend='inductor'")
    for dropped in ("cpp.cxx", "cpp.march", "trace.debug_dir", "global_cache_dir", "debug_dir_root"):
        assert dropped in line
    assert listing(tmp_path) == before
    # Inductor did compile C++, with the real compiler, in minify's private directory, now removed;
    # the user's cache directory was never made.
    private = str(private_parent / "dynscope-minify-caches-")
    assert any(".cpp" in line and private in line for line in compiler_log.read_text().splitlines())
    assert not [p.name for p in private_parent.iterdir() if p.name.startswith("dynscope-")]
    assert not cache.exists()


@pytest.mark.inductor
def test_recorded_shapes_cannot_make_minify_fill_the_machine(recorded, tmp_path):
    """A placeholder recorded as [2**31, 4] float32 (96 GiB as random inputs) is refused
    before anything is allocated; the largest process stays small."""
    def hostile(graph):
        for n in graph["nodes"]:
            if isinstance(n.get("tensor"), dict):
                n["tensor"].update(shape=[2 ** 31, 4], stride=[4, 1])
        return graph

    capture = forge(recorded, tmp_path / "bug.dynscope", graph=hostile)
    script = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
              "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script, sys.executable, "-m", "dynscope", "minify", "--from",
                           str(capture), "--compile", "0/0", "--backend", "eager", "--out", str(tmp_path / "out")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert time.monotonic() - started < 300
    *lines, peak_kib = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert lines[-1].startswith("dynscope: compile 0/0 cannot be rebuilt from the capture") and "GiB" in lines[-1]
    assert int(peak_kib) < 3 * 2 ** 20  # KiB: under 3 GiB for any process of the run
