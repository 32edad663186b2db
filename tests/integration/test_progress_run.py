"""Progress on stderr while a program runs (issue 42 item 3), for real: explain at a terminal (a
pseudo-terminal) shows a live status line with the counts of the capture being written, the
program's own lines whole; in a pipe, at most one line per phase; -q, none."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import EXAMPLES, run_dynscope
from pty_session import run_in_pty

STATUS = re.compile(r"explain · (\d+) frames? compiled · (\d+) breaks? · (\d+) recompiles? · \d+ s · running ")


def test_a_terminal_sees_the_status_line_and_the_programs_lines_whole(tmp_path):
    script = str(EXAMPLES / "graph_breaks.py")
    plain = subprocess.run([sys.executable, script, "--backend", "eager"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    screen = run_in_pty(["explain", "-o", "run.dynscope", script, "--backend", "eager"], cwd=tmp_path, columns=120)
    assert screen.returncode == 0, screen.text[-3000:]
    statuses = [tuple(map(int, m.groups())) for m in STATUS.finditer(screen.raw)]
    assert statuses, screen.raw[:3000]  # the live line was drawn
    # counts only grow, and never pass the run's own (the summary's: 5 frames, 4 breaks, 0 recompiles)
    assert statuses == sorted(statuses) and all(s <= (5, 4, 0) for s in statuses)
    assert "\x1b[r" in screen.raw[screen.raw.rindex("running "):]  # the region reset after the last draw
    lines = screen.program_text.splitlines()
    for line in plain.stdout.splitlines():  # the program's stdout, each line whole, the status drawn aside
        assert line in lines, (line, screen.program_text[-3000:])


def test_a_pipe_gets_one_line_per_phase_and_quiet_none(tmp_path):
    script = str(EXAMPLES / "graph_breaks.py")
    ran = run_dynscope("explain", "-o", "a.dynscope", script, "--backend", "eager", cwd=tmp_path, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    progress = [line for line in ran.stderr.splitlines() if line.startswith("dynscope: ") and line.endswith("…")]
    assert progress == [f"dynscope: running {script}…"]  # explain has one phase: the run
    assert "\x1b" not in ran.stderr  # no terminal control in a log
    quiet = run_dynscope("explain", "-q", "-o", "b.dynscope", script, "--backend", "eager", cwd=tmp_path, timeout=300)
    assert quiet.returncode == 0 and not [x for x in quiet.stderr.splitlines() if x.endswith("…")], quiet.stderr
