"""The runner's fork server on an NVIDIA GPU (CUDA build of torch): dynscope fix's trials fork
from it -- the server creates no CUDA context, each run creates its own -- and a run whose CUDA
context a device fault poisoned, or that was killed holding one, costs only itself.

Skipped without CUDA. Run on the GPU machine (torch 2.11 there).
"""

from __future__ import annotations

import os
import time

import pytest

torch = pytest.importorskip("torch")
# fix's own fork server on CUDA is the subject: no warm fork pool (tests/conftest.py).
pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
              pytest.mark.usefixtures("no_fork_pool")]

from dynscope.fix.trials import TrialRun, run_all, starter_for  # noqa: E402
from dynscope.runner.program import Program  # noqa: E402

_PROGRAM = """
import os, sys, time
import torch
print("parent", os.getppid(), flush=True)
f = torch.compile(lambda x: x.sin() + 1, backend="eager")
x = torch.ones(4, device="cuda")
print("sum", float(f(x).sum().cpu()), flush=True)
if sys.argv[1:] == ["fault"]:  # an out-of-bounds gather: a device-side assert poisons this context
    index = torch.tensor([1 << 20], device="cuda")
    print(float(x[index].sum()))
    torch.cuda.synchronize()
if sys.argv[1:] == ["hang"]:
    print("hanging", flush=True)
    time.sleep(300)
"""


def _stdout(run: TrialRun) -> str:
    with open(os.path.join(run.out_dir, f"{run.name}.stdout")) as f:
        return f.read()


def test_fix_forks_its_trials_on_a_cuda_build_and_a_device_fault_costs_only_its_run(tmp_path, monkeypatch):
    assert torch.version.cuda  # a CUDA build: the trial server used to refuse to fork here
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    (tmp_path / "work" / "prog.py").write_text(_PROGRAM)
    out = tmp_path / "out"
    out.mkdir()
    starter = starter_for(str(out))

    def run(name: str, *args: str, deadline_s: float = 600) -> TrialRun:
        trial = TrialRun(name, [], str(out))
        run_all(Program("script", "prog.py", list(args)), [trial], jobs=1, deadline=time.time() + deadline_s,
                estimate_s=1.0, starter=starter)
        return trial

    try:
        first = run("baseline")
        server = starter.runs._server
        assert server is not None and server.state is not None and server.state.gpu, server and server.state
        fault = run("trial-1", "fault")
        after_fault = run("trial-2")
        hung = run("trial-3", "hang", deadline_s=60)  # stopped at the deadline, holding its CUDA context
        after_kill = run("trial-4")
    finally:
        starter.close()
    log = (out / "fork-server.log").read_text()
    print(log[-2000:])
    print({r.name: (r.startup_s, r.wall_s) for r in (first, fault, after_fault, hung, after_kill)})
    assert "dynscope fork server: forking (each child creates its own CUDA context)" in log
    for good in (first, after_fault, after_kill):
        assert good.facts is not None and good.facts.exit_code == 0, _stdout(good)
        assert f"parent {server.pid}\n" in _stdout(good) and "sum 7.36" in _stdout(good)
    with open(os.path.join(fault.out_dir, "trial-1.stderr")) as f:
        fault_err = f.read()
    print(fault_err[-1500:])
    assert fault.facts is not None and fault.facts.exit_code != 0, _stdout(fault)
    assert "device-side assert" in fault_err or "CUDA error" in fault_err, fault_err[-2000:]
    assert "hanging" in _stdout(hung) and hung.facts is not None and hung.facts.timed_out
    assert starter.runs.replaced == 0  # the server was never poisoned
    # Forked runs start in a fraction of the first (which waited for the server's import of torch).
    assert after_fault.startup_s is not None and first.startup_s is not None
    assert after_fault.startup_s < 3 and after_fault.startup_s * 2 < first.startup_s
