"""dynscope fix's trial runs fork from the runner's fork server (dynscope/runner/fork_server.py),
which imported torch once: a run starts in a fraction of a fresh process's start-up, a run that
crashes costs only itself, and a server that died is replaced for the next run."""

from __future__ import annotations

import os
import signal
import time

import pytest

from dynscope.fix.trials import TrialRun, run_all, starter_for
from dynscope.runner.program import Program

# How dynscope starts, signals and ends the program is the subject here: no warm fork pool (conftest.py).
pytestmark = pytest.mark.usefixtures("no_fork_pool")

_PROGRAM = """
import os, sys
import torch
print("parent", os.getppid(), flush=True)
f = torch.compile(lambda x: x.sin() + 1, backend="eager")
print("sum", float(f(torch.ones(4)).sum()), flush=True)
if sys.argv[1:] == ["crash"]:
    os.abort()
"""


def _run(program: Program, out: str, starter, *names: str) -> list[TrialRun]:
    runs = [TrialRun(name, [], out) for name in names]
    run_all(program, runs, jobs=1, deadline=time.time() + 600, estimate_s=1.0, starter=starter)
    return runs


def _stdout(run: TrialRun) -> str:
    with open(os.path.join(run.out_dir, f"{run.name}.stdout")) as f:
        return f.read()


def test_trials_fork_from_the_server_start_fast_and_a_crash_costs_only_itself(tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")  # each run in a scratch copy of it
    (tmp_path / "work" / "prog.py").write_text(_PROGRAM)
    out = tmp_path / "out"
    out.mkdir()
    starter = starter_for(str(out))
    try:
        server = starter.runs._server
        assert server is not None  # forking: on every build of torch, CUDA ones included
        first, second = _run(Program("script", "prog.py", []), str(out), starter, "baseline", "trial-1")
        crashed, = _run(Program("script", "prog.py", ["crash"]), str(out), starter, "trial-2")
        after, = _run(Program("script", "prog.py", []), str(out), starter, "trial-3")
        for run in (first, second, after):
            assert run.workdir is not None and run.workdir_note is None
            assert run.facts is not None and run.facts.ran and run.facts.exit_code == 0, _stdout(run)
            assert f"parent {server.pid}\n" in _stdout(run)  # forked by the server, not a fresh process
            assert run.startup_s is not None
        # The first run waited for the server's import of torch; a forked run starts at once.
        assert second.startup_s < 1.5 and after.startup_s < 1.5, (first.startup_s, second.startup_s)
        assert second.startup_s * 2 < first.startup_s, (first.startup_s, second.startup_s)
        # The crash is the run's result (its capture says how it ended); the server goes on.
        assert crashed.facts is not None and crashed.facts.signal == signal.SIGABRT
        assert starter.runs._server is server and server.alive and starter.runs.replaced == 0
        # A server that died is replaced, and the next run goes on.
        os.kill(server.pid, signal.SIGKILL)
        server.proc.wait(timeout=30)
        again, = _run(Program("script", "prog.py", []), str(out), starter, "trial-4")
        assert again.facts is not None and again.facts.exit_code == 0, _stdout(again)
        assert starter.runs.replaced == 1 and starter.runs._server is not server
        assert f"parent {starter.runs._server.pid}\n" in _stdout(again)
    finally:
        starter.close()
    log = (out / "fork-server.log").read_text()
    assert log.count("dynscope fork server: forking") == 2, log
