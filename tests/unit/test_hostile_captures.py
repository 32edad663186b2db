"""Captures from strangers (issue 15): bounded reads, honest errors, nothing interpreted.

Each hostile capture is a real capture rewritten the way an attacker would; each command
runs as its own process, as a user would run it, and its peak memory is measured."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hostile import add_payload, blobs, point_event_at, replace_blob, set_strings, small_capture, zlib_bomb

MB = 1024 * 1024
# A command keeps at most a few copies of one payload's first 32 MB (the view's budget); a
# payload inflated whole (the ones below are 400 MB) would take far more.
MEMORY_CEILING = 300 * MB

COMMANDS = {
    "summary": ["summary", "{c}"],
    "summary --json": ["summary", "{c}", "--json"],
    "stages": ["stages", "{c}"],
    "show": ["show", "{c}", "--compile", "0/0", "--stage", "dynamo"],
    "show --raw": ["show", "{c}", "--compile", "0/0", "--stage", "dynamo", "--raw"],
    "report html": ["report", "{c}", "-o", "{out}/r.html"],
    "report md": ["report", "{c}", "--format", "md"],
    "report json": ["report", "{c}", "--format", "json"],
}


# The command runs under a small launcher, so its peak RSS is its own: forked straight from
# the test process, it would start out counting the test's own pages.
_LAUNCHER = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=open(sys.argv[1], "w"))
sys.exit(code)
"""


def run_measured(args: list[str], cwd: Path) -> tuple[int, str, str, int]:
    """(exit code, stdout, stderr, peak RSS in bytes) of `dynscope ARGS` in a fresh process."""
    out_path, err_path, rss_path = cwd / "stdout.txt", cwd / "stderr.txt", cwd / "rss.txt"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        code = subprocess.call([sys.executable, "-c", _LAUNCHER, str(rss_path), sys.executable, "-m", "dynscope", *args],
                               cwd=cwd, stdout=out, stderr=err, env={**os.environ, "COLUMNS": "120"})
    return (code, out_path.read_text("utf-8", "replace"), err_path.read_text("utf-8", "replace"),
            int(rss_path.read_text()))


def command(name: str, capture: Path, out: Path) -> list[str]:
    return [a.format(c=capture, out=out) for a in COMMANDS[name]]


@pytest.fixture
def capture(tmp_path) -> Path:
    return small_capture(tmp_path / "c.dynscope", payload="def forward(x):\n    return x\n" * 20)


def _stage_blob(capture: Path) -> tuple[str, int]:
    (digest, _codec, size), = blobs(capture)
    return digest, size


@pytest.mark.parametrize("declared, why", [
    (None, "compressed bytes cannot inflate to the declared"),  # the row's own small size
    (1 * MB, "it holds more than its declared 1048576 bytes"),  # inflating stops one byte past it
])
def test_a_zlib_bomb_with_a_lying_size_is_corruption_said_in_one_line(capture, tmp_path, declared, why):
    digest, size = _stage_blob(capture)
    replace_blob(capture, digest, codec="zlib", size=declared or size, data=zlib_bomb(400 * MB))
    for name in COMMANDS:
        code, out, err, rss = run_measured(command(name, capture, tmp_path), tmp_path)
        assert rss < MEMORY_CEILING, (name, rss)
        if name.startswith("show") or name == "report html":  # these read the stage's text
            assert code == 2, (name, err)
            assert err.count("\n") == 1 and "is corrupt: " in err and why in err, (name, err)
        else:  # the others never needed it
            assert code == 0 and err == "", (name, err)
    assert not (tmp_path / "r.html").exists()


def test_a_huge_honest_payload_is_shown_truncated_with_bounded_memory(capture, tmp_path):
    text = "A" * (400 * MB)
    digest = add_payload(capture, text)
    point_event_at(capture, "dynamo_output_graph", digest)
    del text
    code, out, err, rss = run_measured(command("show --raw", capture, tmp_path), tmp_path)
    assert code == 0, err
    assert out.rstrip().endswith("… truncated at 33.6 MB of 419.4 MB")
    assert len(out) < 34 * MB
    assert rss < MEMORY_CEILING, rss
    for name in ("summary", "stages", "report html", "report json"):
        code, out, err, rss = run_measured(command(name, capture, tmp_path), tmp_path)
        assert code == 0, (name, err)
        assert rss < MEMORY_CEILING, (name, rss)


@pytest.mark.parametrize("tamper, message", [
    ("wrong_hash", "its content does not match its hash"),
    ("size_too_big", "it declares 9999 bytes but holds"),
    ("raw_size_lie", "it declares 5 bytes but holds"),
    ("not_zlib", "it does not inflate"),
    ("codec", "unknown codec 'gzip'"),
])
def test_lying_payload_rows_are_refused(capture, tmp_path, tamper, message):
    digest, size = _stage_blob(capture)
    real = ("def forward(x):\n    return x\n" * 20).encode()
    forged = real.replace(b"return x", b"return y")
    rows = {
        "wrong_hash": ("zlib", size, zlib.compress(forged)),
        "size_too_big": ("zlib", 9999, zlib.compress(real)),
        "raw_size_lie": ("raw", 5, real),
        "not_zlib": ("zlib", size, b"\x78\x9c not deflate at all"),
        "codec": ("gzip", size, real),
    }
    codec, declared, data = rows[tamper]
    replace_blob(capture, digest, codec=codec, size=declared, data=data)
    code, out, err, _ = run_measured(command("show --raw", capture, tmp_path), tmp_path)
    assert code == 2 and out == ""
    assert err.startswith(f"dynscope: payload {digest[:12]} is corrupt: {message}"), err
    assert err.count("\n") == 1


HOSTILE = ("\x1b]0;pwned\x07\x1b[2J\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"
           "[@click=app.quit]x[/] [bold red]big[/] \u202egnp.exe\x9b31m")


def test_terminal_control_sequences_from_a_capture_never_reach_the_terminal(tmp_path):
    capture = small_capture(tmp_path / "c.dynscope", strings=HOSTILE,
                            payload=f"def forward(x):  # {HOSTILE}\n    return x\n")
    set_strings(capture, HOSTILE)
    for name in ("summary", "stages", "show", "show --raw"):
        code, out, err, _ = run_measured(command(name, capture, tmp_path), tmp_path)
        assert code == 0, (name, err)
        for bad in ("\x1b]", "\x1b[2J", "\x07", "\u202e", "\x9b"):
            assert bad not in out + err, (name, repr(bad))
        assert "\\x1b]0;pwned" in out, (name, out)  # rich drops the BEL itself
        assert "\\u202e" in out
    # Markup stays text: the summary shows it verbatim.
    code, out, err, _ = run_measured(command("summary", capture, tmp_path), tmp_path)
    assert "[@click=app.quit]x[/] [bold red]big[/]" in out
