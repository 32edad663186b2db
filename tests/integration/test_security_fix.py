"""``dynscope fix`` on real runs (backend="eager"): it asks before re-running a recorded command,
keeps runs apart, and leaves nothing running (issue 20, items 2 and 9).

Few real fix runs, each with ``--only break`` on a tiny program: two side by side in one directory
(one from a capture, confirmed on a terminal), three stopped by a signal, one stopped by its budget.
The torch-free refusals are in tests/unit/test_security_fix_checks.py.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_dynscope

PROGRAMS = REPO / "tests" / "programs"
GONE_WITHIN_S = 5  # after fix exits, none of the processes it started may still be running


def _fix(args: list[str], cwd: Path, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dynscope", "fix", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kwargs)


def test_from_asks_on_a_terminal_and_two_runs_in_one_directory_stay_apart(tmp_path):
    """fix_appends.py appends to runs.log in its working directory and prints its line count:
    both runs must judge the remedy as for any program (fixed, outputs equal), side by side."""
    shutil.copy(PROGRAMS / "fix_appends.py", tmp_path / "prog.py")
    explain = run_dynscope("explain", "-q", "-o", "run.dynscope", "prog.py", cwd=tmp_path, timeout=300)
    assert explain.returncode == 0, explain.stderr[-3000:]
    assert (tmp_path / "runs.log").read_text() == "ran\n"
    primary, secondary = pty.openpty()
    try:
        asked = _fix(["--from", "run.dynscope", "--only", "break", "-o", "a.json", "--md", "a.md"], tmp_path,
                     stdin=secondary)
        plain = _fix(["--only", "break", "-o", "b.json", "prog.py"], tmp_path, stdin=subprocess.DEVNULL)
        os.write(primary, b"y\n")
        outputs = [p.communicate(timeout=300) for p in (asked, plain)]
    finally:
        os.close(primary)
        os.close(secondary)
    assert asked.returncode == 0 and plain.returncode == 0, [err.decode()[-3000:] for _, err in outputs]
    prompt = outputs[0][1].decode()
    assert f"  command:   {sys.executable} {tmp_path / 'prog.py'}\n" in prompt
    assert f"  directory: {tmp_path}\n" in prompt and "Run it? [y/N]" in prompt
    docs = [json.loads((tmp_path / name).read_text()) for name in ("a.json", "b.json")]
    assert docs[0]["out_dir"] != docs[1]["out_dir"]
    for doc, (_, err) in zip(docs, outputs):
        # the setting, and beside it (first batch) the keep-tensor rewrite of the same .item() break
        assert sorted(t["applies_as"] for t in doc["trials"]) == ["config", "source"]
        row, = (t for t in doc["trials"] if t["applies_as"] == "config")
        assert row["remedy"] == "torch._dynamo.config.capture_scalar_outputs = True"
        assert row["verdict"] == "fixed" and row["correct"] is True, row
        assert doc["stdin"] == "/dev/null" and doc["scratch_copies"] is True
        assert f"runs: stdin: /dev/null; each in a scratch copy of {tmp_path}" in err.decode()
        out = Path(doc["out_dir"])
        assert out.parent == tmp_path and (out / "baseline.dynscope").is_file() and (out / "trial-1.dynscope").is_file()
        assert not list(out.glob("*.cwd"))  # the scratch copies are gone
        assert (out / "baseline.stdout").read_text() == (out / "trial-1.stdout").read_text()
    assert "stdin: /dev/null" in (tmp_path / "a.md").read_text()
    # the user's directory: the runs wrote into their copies, not into it
    assert (tmp_path / "runs.log").read_text() == "ran\n"


def _processes() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, start time, state) from /proc."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            found[int(name)] = (int(fields[1]), fields[19], fields[0])
    return found


def _descendants(root: int) -> dict[int, str]:
    processes = _processes()
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, started, _state) in processes.items():
            if ppid == parent and pid not in found:
                found[pid] = started
                frontier.append(pid)
    return found


def _still_running(snapshot: dict[int, str]) -> dict[int, str]:
    now = _processes()
    return {pid: started for pid, started in snapshot.items()
            if pid in now and now[pid][1] == started and now[pid][2] != "Z"}


def _wait_for_hang(work: Path, proc: subprocess.Popen) -> None:
    end = time.time() + 240
    while time.time() < end and proc.poll() is None:
        if any("hanging" in p.read_text() for p in (work / "out").glob("*.stdout")):
            return
        time.sleep(0.2)
    raise AssertionError(f"the program never started hanging: {proc.poll()} {proc.stderr.read().decode()[-2000:]}"
                         if proc.poll() is not None else "the program never started hanging")


@pytest.mark.usefixtures("no_fork_pool")  # fix's own fork server is the subject
@pytest.mark.parametrize("name, where", [("SIGTERM", "trial"), ("SIGHUP", "baseline"), ("SIGINT", "trial"),
                                         ("SIGKILL", "trial")])
def test_a_signal_ends_the_fork_server_and_every_run(tmp_path, name, where):
    """Nothing fix started is left 5 s after the signal: the fork server, the run, the program's own
    child. SIGKILL leaves fix no cleanup to do: the fork server sees its input end and ends the runs."""
    sig = getattr(signal, name)
    shutil.copy(PROGRAMS / "fix_hangs.py", tmp_path / "prog.py")
    args = ["--out", "out", "--only", "break", "prog.py"] + (["--hang-in-baseline"] if where == "baseline" else [])
    proc = _fix(args, tmp_path, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for_hang(tmp_path, proc)
        running = _descendants(proc.pid)
        # the fork server, the run, and the program's own child (three at least)
        assert len(running) >= 3, running
        os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if sig == signal.SIGKILL:
        assert proc.returncode == -sig
    else:
        assert proc.returncode == 128 + sig, err.decode()[-2000:]
        assert err.decode().strip().splitlines()[-1].startswith(
            f"dynscope: fix stopped by {name}: every run it started has ended")
    end = time.time() + GONE_WITHIN_S
    while _still_running(running) and time.time() < end:
        time.sleep(0.1)
    assert not _still_running(running)
    if sig != signal.SIGKILL:  # nothing removes a killed run's scratch copy
        assert not list((tmp_path / "out").glob("*.cwd"))


def test_the_budget_bounds_the_first_run(tmp_path):
    shutil.copy(PROGRAMS / "fix_hangs.py", tmp_path / "prog.py")
    budget = 5  # the baseline hangs: any budget ends it; a short one keeps the test short
    started = time.time()
    proc = _fix(["--out", "out", "--budget", str(budget), "--only", "break", "prog.py", "--hang-in-baseline"],
                tmp_path, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=budget + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.time() - started
    assert proc.returncode == 2 and took < budget + 15, (took, err.decode()[-2000:])
    line, = [x for x in err.decode().splitlines() if "budget" in x]
    assert line.startswith(f"dynscope: the first run of the program did not finish within --budget {budget} s")
    time.sleep(1)
    leftovers = subprocess.run(["pgrep", "-f", "import time; time.sleep(300)"], capture_output=True, text=True)
    mine = [pid for pid in leftovers.stdout.split() if _cwd_of(int(pid)).startswith(str(tmp_path))]
    assert not mine


def _cwd_of(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""
