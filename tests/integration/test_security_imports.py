"""Issue 20 with live runs: a recording cut by a full disk or a signal says so on the summary's
first line and never passes `check`; a program that ends itself with os._exit is complete; and
`import -o` refuses a capture that a running `explain` is writing."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from conftest import REPO, explain_holding_its_capture, run_dynscope

PROGRAMS = REPO / "tests" / "programs"
LOG = next((REPO / "tests" / "data" / "torch_trace" / "graph_breaks_eager").glob("*.log.gz"))


def _check_refuses(capture: Path, why: str) -> None:
    for args in (["--max-graph-breaks", "0"], ["--max-graph-breaks", "1000", "--max-recompiles", "1000"]):
        check = run_dynscope("check", str(capture), *args)
        assert check.returncode == 2 and check.stdout == "", check.stdout
        assert check.stderr.count("\n") == 1 and "Traceback" not in check.stderr
        assert check.stderr.startswith(f"dynscope: {capture} is an incomplete capture: {why}"), check.stderr


def test_a_run_cut_by_a_full_disk_says_so_first_and_never_passes_check(small_filesystem, tmp_path):
    """Before: the summary said "compiled nothing — was the compiled function called?" and
    `check --max-graph-breaks 0` passed it."""
    capture = small_filesystem / "run.dynscope"
    proc = run_dynscope("explain", "-o", str(capture), str(PROGRAMS / "fills_disk.py"), cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    why = "a write failed (the disk is full) and recording stopped there"
    # explain's own end-of-run summary, then `summary`: the first line says it.
    summary_start = proc.stderr[proc.stderr.index("INCOMPLETE CAPTURE"):]
    assert summary_start.startswith(f"INCOMPLETE CAPTURE {capture}: {why};"), proc.stderr
    summary = run_dynscope("summary", str(capture))
    assert summary.returncode == 0, summary.stderr
    assert summary.stdout.splitlines()[0].startswith(f"INCOMPLETE CAPTURE {capture}: {why};")
    doc = json.loads(run_dynscope("summary", str(capture), "--json").stdout)
    assert (doc["complete"], doc["incomplete_reason"], doc["run"]["exit_code"]) == (False, why, 5)
    _check_refuses(capture, why)


def test_a_program_killed_by_a_signal_is_incomplete_and_says_which(tmp_path):
    program = tmp_path / "killed.py"
    program.write_text("import os, signal, torch\n"
                       "torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2))\n"
                       "print('compiled', flush=True)\n"
                       "os.kill(os.getpid(), signal.SIGKILL)\n")
    capture = tmp_path / "killed.dynscope"
    proc = run_dynscope("explain", "-q", "-o", str(capture), str(program), cwd=tmp_path)
    assert proc.returncode == -signal.SIGKILL and proc.stdout == "compiled\n"
    summary = run_dynscope("summary", str(capture))
    first, headline = summary.stdout.splitlines()[:2]
    why = "the program was killed by signal 9 (SIGKILL) before it ended"
    assert first.startswith(f"INCOMPLETE CAPTURE {capture}: {why};"), summary.stdout
    assert "killed by signal 9" in headline
    doc = json.loads(run_dynscope("summary", str(capture), "--json").stdout)
    assert doc["complete"] is False and doc["totals"]["compiles"] == 1  # readable: everything before the kill
    _check_refuses(capture, why)


def test_a_program_that_ends_itself_with_os_exit_is_complete(tmp_path):
    capture = tmp_path / "exited.dynscope"
    proc = run_dynscope("explain", "-q", "-o", str(capture), str(PROGRAMS / "behaves_like_python.py"),
                        "--os-exit", "0", input="", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(run_dynscope("summary", str(capture), "--json").stdout)
    assert (doc["complete"], doc["incomplete_reason"], doc["totals"]["compiles"]) == (True, None, 1)
    check = run_dynscope("check", str(capture), "--max-graph-breaks", "0")
    assert check.returncode == 0, check.stderr


def test_import_refuses_the_capture_a_running_explain_writes(tmp_path):
    """Before: `import -o X` ignored the lock and replaced the running explain's capture."""
    with explain_holding_its_capture(tmp_path) as (first, capture):
        imported = run_dynscope("import", str(LOG), "-o", str(capture), cwd=tmp_path)
        assert imported.returncode == 2
        assert imported.stderr == (f"dynscope: another dynscope run (pid {first.pid}) is writing {capture}: wait "
                                   "for it to end or choose another -o\n")
    out, err = first.ended
    assert first.returncode == 3, err
    doc = json.loads(run_dynscope("summary", str(capture), "--json").stdout)
    assert doc["totals"]["compiles"] == 2 and doc["complete"] is True  # explain's run, whole and unmixed
    assert doc["imported"] is None
