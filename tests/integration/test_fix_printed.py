"""fix's output used as printed (issue 42): in an 80-column terminal every line of the change to
make is printed whole; the --diff written from a repository's root, for a script in a subfolder,
applies there with `git apply`; a program that fails on its own is said first, exit 2."""

from __future__ import annotations

import subprocess

from conftest import run_dynscope
from pty_session import run_in_pty

# One break a source rewrite removes (tensor-where), the branch's lines long enough to pass column 80.
PROGRAM = '''import torch


def forward(x):
    y = torch.sin(x)
    if y.sum() > 0:  # a Python branch on a tensor's value: one graph break, which torch.where removes
        y = y * 2.0
    else:
        y = y - 1.0
    return torch.cos(y)


compiled = torch.compile(forward, backend="eager")
for _ in range(2):
    print(round(float(compiled(torch.ones(4)).sum()), 4))
'''

ARGPARSE_PROGRAM = '''import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=1)
parser.parse_args()
print("never here")
'''


def _repository(tmp_path, text: str):
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "prog.py").write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def test_in_80_columns_the_change_is_printed_whole_and_the_diff_applies_from_the_root(tmp_path):
    repo = _repository(tmp_path, PROGRAM)
    original = (repo / "models" / "prog.py").read_text()
    screen = run_in_pty(["fix", "--only", "break", "--jobs", "2", "--out", str(tmp_path / "out"),
                         "--diff", "fix.diff", "models/prog.py"], cwd=repo, columns=80, timeout=500)
    assert screen.returncode == 0, screen.text[-4000:]
    diff = (repo / "fix.diff").read_text()
    assert diff.startswith("--- a/models/prog.py\n+++ b/models/prog.py\n"), diff  # from the repository's root
    printed = screen.text.splitlines()
    long_lines = [line for line in diff.splitlines() if len(line) > 80]
    assert long_lines  # (what the check is for: lines a console would wrap or crop)
    for line in diff.splitlines():
        assert line in printed, (line, screen.text[-3000:])  # every diff line, whole, as a line of its own
    start = printed.index(diff.splitlines()[0])
    assert printed[start:start + len(diff.splitlines())] == diff.splitlines()  # in order, nothing between
    table = printed[:printed.index("The change to make (verified together in one run):")]
    assert not any("┃" in line or "│" in line for line in table)  # no nine-column table squeezed into 80
    applied = subprocess.run(["git", "apply", "fix.diff"], cwd=repo, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    changed = (repo / "models" / "prog.py").read_text()
    assert changed != original and "torch.where(" in changed


def test_a_program_that_fails_on_its_own_is_said_first_and_exits_2(tmp_path):
    repo = _repository(tmp_path, ARGPARSE_PROGRAM)
    # The README's old mistake: options after the script are the program's (argparse refuses --diff).
    result = run_dynscope("fix", "--out", str(tmp_path / "out"), "models/prog.py", "--diff", "fix.diff",
                          cwd=repo, timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    err = result.stderr
    assert "No remedy to try" not in err and not (repo / "fix.diff").exists()
    assert "prog.py: error: unrecognized arguments: --diff fix.diff" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("dynscope: the program exited with status 2 without compiling anything"), last
    assert err.index("unrecognized arguments") < err.index("dynscope: the program exited")
    progress = [line for line in err.splitlines() if line.endswith("…")]
    assert progress == ["dynscope: baseline: running the program once as it is…"]  # a pipe: one line per phase
