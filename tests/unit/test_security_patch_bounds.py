"""``dynscope fix --patch`` reads a stranger's diff within bounds (issue 39, defects N6 and N7).

Before: a 5,000-hunk patch kept fix past 150 s outside --budget (each hunk sorted every line of the
file by its distance to the hunk's header); ``--patch`` on a FIFO hung and on /dev/zero read until
memory ran out (exit 70); a hunk header with a line number of more than 4,300 digits was an internal
error. Each attack runs the real command in a fresh process (tests/unit/hostile_fix.py: its peak RSS
measured) and must end in one line and exit 2 before any run starts: no output directory, nothing
changed, in less time than its --budget plus the CLI's start.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hostile_fix import last_rss, run_fix, tree

from dynscope.fix.unified_diff import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_HUNKS,
    MAX_PATCH_BYTES,
    MAX_SEARCH_LINES,
    MAX_TOTAL_BYTES,
)

START_S = 30  # the CLI's start without torch, on a busy machine
RSS_BOUND = 300 * 1024 * 1024  # the CLI is about 60 MB; a patch of at most 16 MiB and the file it changes
BUDGET_S = 20


@pytest.fixture
def work(tmp_path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "prog.py").write_text("print('a program that must not run')\n")
    return work


def refused(work: Path, patch: str | Path, *words: str, budget: float = BUDGET_S) -> str:
    before = tree(work)
    code, output, seconds = run_fix(["--patch", str(patch), "--budget", str(budget), "prog.py"], work,
                                    timeout=budget + 120)
    assert code == 2, output
    line, = output.strip().splitlines()
    assert line.startswith("dynscope: ") and "Traceback" not in output and "internal error" not in output, output
    assert "must not run" not in output
    for word in words:
        assert word in line, (word, line)
    assert seconds < budget + START_S, seconds
    assert last_rss and last_rss[0] < RSS_BOUND, last_rss
    assert tree(work) == before  # no output directory, nothing written
    return line


def write(work: Path, text: str, name: str = "the.patch") -> Path:
    path = work.parent / name
    path.write_text(text, newline="")
    return path


def hunks_stated_at_line_1(count: int, lines: int, last_applies: bool) -> tuple[str, str]:
    """(file, patch): ``count`` one-line hunks spread over a ``lines``-line file, every header naming line 1."""
    text = "".join(f"x{i} = {i}\n" for i in range(lines))
    step = lines // count
    hunks = [f"@@ -1,1 +1,1 @@\n-x{h * step} = {h * step}\n+x{h * step} = -1\n" for h in range(count)]
    if not last_applies:
        hunks[-1] = "@@ -1,1 +1,1 @@\n-not in the file\n+x\n"
    return text, "--- a/m.py\n+++ b/m.py\n" + "".join(hunks)


def test_a_5000_hunk_patch_is_read_in_a_fraction_of_its_budget(work):
    """N6: 5,000 hunks on a 200,000-line file, all stated at line 1 (each found by search), the last one not
    applying so that fix stops before running anything: before, the search alone took minutes."""
    text, patch = hunks_stated_at_line_1(MAX_HUNKS, 200_000, last_applies=False)
    (work / "m.py").write_text(text)
    refused(work, write(work, patch), f"hunk {MAX_HUNKS} of m.py does not apply")


def test_more_hunks_or_files_than_the_limits_are_one_line(work):
    (work / "m.py").write_text("a\n")
    refused(work, write(work, "--- a/m.py\n+++ b/m.py\n" + "@@ -1 +1 @@\n-a\n+b\n" * (MAX_HUNKS + 1)),
            f"more than {MAX_HUNKS:,} hunks")
    files = "".join(f"--- a/f{i}.py\n+++ b/f{i}.py\n@@ -1 +1 @@\n-a\n+b\n" for i in range(MAX_FILES + 1))
    refused(work, write(work, files), f"more than {MAX_FILES:,} files")


def test_a_search_that_would_outlast_the_budget_stops_at_it(work):
    """A million identical lines and a hunk that matches only at their end: the search is stopped by --budget."""
    (work / "m.py").write_text("x\n" * 1_000_000 + "y\n")
    patch = write(work, "--- a/m.py\n+++ b/m.py\n@@ -1,1001 +1,1001 @@\n" + " x\n" * 1000 + "-y\n+z\n")
    refused(work, patch, "applying it took the whole --budget", budget=0.05)
    # with time enough, the search's own bound ends it
    refused(work, patch, f"more than {MAX_SEARCH_LINES:,} lines compared")


@pytest.mark.parametrize("number", [str(2 ** 63), "9" * 4400])
def test_line_numbers_near_2_63_or_past_python_s_int_limit_are_one_line(work, number):
    (work / "m.py").write_text("a\n")
    refused(work, write(work, f"--- a/m.py\n+++ b/m.py\n@@ -{number},1 +1,1 @@\n-a\n+b\n"), "more than 18 digits")


def test_a_fifo_is_refused_before_it_is_opened(work):
    """N7: open() of a FIFO waits for a writer forever. Nobody writes to this one."""
    fifo = work.parent / "the.patch"
    os.mkfifo(fifo)
    refused(work, fifo, "is a FIFO")


def test_a_fifo_with_a_writer_is_refused_too(work):
    """A writer keeps the FIFO open and would feed it forever: never read."""
    fifo = work.parent / "the.patch"
    os.mkfifo(fifo)
    stop = threading.Event()

    def feed() -> None:
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # opens without waiting for a reader; never blocks on a full pipe
        try:
            while not stop.wait(0.05):
                try:
                    os.write(fd, b"@@ -1 +1 @@\n" * 100)
                except BlockingIOError:
                    pass
        finally:
            os.close(fd)
    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        refused(work, fifo, "is a FIFO")
    finally:
        stop.set()


@pytest.mark.parametrize("device,kind", [("/dev/zero", "a character device"), ("/dev/urandom", "a character device")])
def test_a_device_is_refused_before_it_is_read(work, device, kind):
    """N7: /dev/zero was read until memory ran out (exit 70)."""
    if not os.path.exists(device):
        pytest.skip(f"no {device} here")
    refused(work, device, f"is {kind}")


def test_a_directory_a_sparse_giant_and_bad_utf_8_are_one_line(work):
    refused(work, work, "is a directory")
    giant = work.parent / "giant.patch"
    with open(giant, "wb") as f:
        f.truncate(MAX_PATCH_BYTES + 1)  # sparse: costs no disk, and must cost no memory
    refused(work, giant, f"larger than {MAX_PATCH_BYTES >> 20} MiB")
    bad = work.parent / "bad.patch"
    bad.write_bytes(b"--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+\xff\xfe\n")
    refused(work, bad, "not UTF-8 (byte")


def test_a_patched_file_that_is_a_fifo_or_device_link_is_never_opened(work):
    os.mkfifo(work / "m.py")
    os.symlink("/dev/zero", work / "z.py")
    refused(work, write(work, "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n"), "m.py does not exist")
    refused(work, write(work, "--- a/z.py\n+++ b/z.py\n@@ -1 +1 @@\n-a\n+b\n"), "z.py leads outside")


def test_the_disable_diff_never_opens_a_fifo_named_like_the_file(tmp_path):
    """With --from, the tree is the capture's directory: a FIFO there named like the file a break is in
    blocked the diff fix prints for torch.compiler.disable (open() waits for a writer)."""
    from dynscope.fix.patches import disable_diff

    os.mkfifo(tmp_path / "m.py")
    answer: list[object] = []
    reader = threading.Thread(target=lambda: answer.append(disable_diff(str(tmp_path / "m.py"), "f", 3, str(tmp_path))),
                              daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive() and answer == [None]


def test_the_files_a_patch_changes_are_bounded_together(work):
    """Many files, each under the 16 MiB limit: sparse files of NULs (valid UTF-8) cost the attacker no disk."""
    for i in range(5):
        with open(work / f"f{i}.py", "wb") as f:
            f.truncate(MAX_FILE_BYTES)
    patch = "".join(f"--- a/f{i}.py\n+++ b/f{i}.py\n@@ -1 +1 @@\n-a\n+b\n" for i in range(5))
    refused(work, write(work, patch), f"add up to more than {MAX_TOTAL_BYTES >> 20} MiB")
