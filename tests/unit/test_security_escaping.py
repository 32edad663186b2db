"""One escaping rule for every output (issue 20 item 5).

Captures forged so that every string field (the run's meta, every event's metadata, every
payload, the file name) holds ESC, OSC 0/8/52, CSI, C1 CSI, bidi overrides and isolates, NUL,
BEL, CR, DEL, a lone surrogate and markup; every read command runs on them as a user would
(its own process), and every TUI view and panel is driven by Textual's Pilot. No raw control
character may reach stdout, stderr, an output file or the screen, nothing may end as exit 70,
and markup stays text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_views import HOSTILE, forge, forge_surrogates, forge_trace_log, unsafe_in_bytes

# Stated bound for one command on a forged capture (they take about half a second each).
SECONDS = 60
# rich's own styling codes when it believes it writes to a terminal (colour forced below):
# select graphic rendition only. Anything else with an ESC in it came from content.
_SGR = re.compile("\x1b\\[[0-9;]*m")


@pytest.fixture(scope="module")
def forged(tmp_path_factory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("hostile-views")
    return {
        "dir": directory,
        "breaks": forge("graph_breaks_eager", directory),
        "recompiles": forge("recompiles_eager", directory, name="r\x1b]0;x\x07"),
        "kernels": forge("conv_net_inductor", directory, name="k"),
        "ids": forge("graph_breaks_eager", directory, name="ids", compile_ids=True),
        "log": forge_trace_log(directory),
    }


# Each read command: (name, argv with {breaks}, {recompiles}, {kernels}, {ids}, {log}, {out}; the
# files it writes under {out}; the exit codes it may end with).
COMMANDS = [
    ("summary", ["summary", "{breaks}"], [], {0}),
    ("summary recompiles", ["summary", "{recompiles}"], [], {0}),
    ("summary kernels", ["summary", "{kernels}"], [], {0}),
    ("summary ids", ["summary", "{ids}"], [], {0}),
    ("summary ranks", ["summary", "{breaks}", "{recompiles}"], [], {0}),
    ("summary --json", ["summary", "{breaks}", "--json"], [], {0}),
    ("summary --json ranks", ["summary", "{breaks}", "{kernels}", "--json"], [], {0}),
    ("stages", ["stages", "{kernels}"], [], {0}),
    ("stages ids", ["stages", "{ids}"], [], {0}),
    ("show", ["show", "{breaks}", "--compile", "0/0", "--stage", "dynamo"], [], {0}),
    ("show --raw", ["show", "{breaks}", "--compile", "0/0", "--stage", "dynamo", "--raw"], [], {0}),
    ("show kernel", ["show", "{kernels}", "--compile", "0/0", "--stage", "output_code"], [], {0}),
    ("show missing stage", ["show", "{kernels}", "--compile", "0/0", "--stage", "kernel:nope"], [], {2}),
    ("diff", ["diff", "{kernels}", "--compile", "0/0", "--to", "post_grad"], [], {0}),
    ("diff --raw", ["diff", "{kernels}", "--compile", "0/0", "--to", "aot_forward", "--raw"], [], {0}),
    ("diff --against", ["diff", "{breaks}", "--compile", "0/0", "--against", "1/0"], [], {0}),
    ("diff --against recompile", ["diff", "{recompiles}", "--compile", "0/0", "--against", "0/1"], [], {0}),
    ("graph dot", ["graph", "{kernels}", "--compile", "0/0", "--stage", "post_grad", "-o", "{out}/g.dot"],
     ["g.dot"], {0}),
    ("report html", ["report", "{breaks}", "-o", "{out}/r.html"], ["r.html"], {0}),
    ("report html kernels", ["report", "{kernels}", "{recompiles}", "-o", "{out}/k.html"], ["k.html"], {0}),
    ("report md", ["report", "{breaks}", "--format", "md", "-o", "{out}/r.md"], ["r.md"], {0}),
    ("report md stdout", ["report", "{recompiles}", "--format", "md"], [], {0}),
    ("report json", ["report", "{kernels}", "--format", "json", "-o", "{out}/r.json"], ["r.json"], {0}),
    ("report --against", ["report", "{breaks}", "--against", "{recompiles}", "--format", "md"], [], {0}),
    ("check text", ["check", "{breaks}", "--max-graph-breaks", "0", "--max-recompiles", "0",
                    "--junit", "{out}/j.xml"], ["j.xml"], {1}),
    ("check github", ["check", "{recompiles}", "--max-graph-breaks", "0", "--max-recompiles", "0",
                      "--format", "github"], [], {1}),
    ("check baseline", ["check", "{breaks}", "--baseline", "{recompiles}", "--format", "github",
                        "--junit", "{out}/jb.xml"], ["jb.xml"], {0, 1}),
    ("compare", ["compare", "{recompiles}", "{breaks}"], [], {0}),
    ("compare --md", ["compare", "{recompiles}", "{breaks}", "--md"], [], {0}),
    ("compare --json", ["compare", "{breaks}", "{kernels}", "--json"], [], {0}),
    ("timeline", ["timeline", "{breaks}", "{kernels}", "-o", "{out}/t.json"], ["t.json"], {0}),
    ("import", ["import", "{log}", "-o", "{out}/imported.dynscope"], [], {0}),
]


def _run(argv: list[str], cwd: Path, *, colour: bool) -> tuple[int, bytes, bytes, float]:
    env = {**os.environ, "COLUMNS": "100"}
    if colour:  # rich styles as on a terminal: content must not smuggle its own sequences in
        env.update(FORCE_COLOR="1", TTY_COMPATIBLE="1")
    else:
        env.pop("FORCE_COLOR", None)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dynscope", *argv], cwd=cwd, capture_output=True, env=env,
                          timeout=SECONDS * 2)
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def _content(data: bytes, *, colour: bool) -> bytes:
    return _SGR.sub("", data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape") if colour else data


# Commands whose output rich styles on a terminal: run again as if on one.
_STYLED = [c for c in COMMANDS if c[0].split()[0] in ("summary", "stages", "show", "diff", "compare", "check")
           and not c[0].endswith(("json", "json ranks", "md", "github"))]


@pytest.mark.parametrize("name, argv, outputs, codes, colour",
                         [(*c, False) for c in COMMANDS] + [(*c, True) for c in _STYLED],
                         ids=[f"{c[0]}-piped" for c in COMMANDS] + [f"{c[0]}-terminal" for c in _STYLED])
def test_no_control_character_from_a_capture_reaches_any_output(forged, tmp_path, name, argv, outputs, codes,
                                                                colour):
    args = [a.format(out=tmp_path, **{k: v for k, v in forged.items() if k != "dir"}) for a in argv]
    code, out, err, seconds = _run(args, tmp_path, colour=colour)
    assert code in codes, (name, code, err.decode(errors="replace")[-2000:])
    assert seconds < SECONDS, (name, seconds)
    assert err.count(b"\n") <= 3, (name, err[-2000:])  # a line or two of notes, never a traceback
    assert unsafe_in_bytes(_content(out, colour=colour)) == [], (name, "stdout", out[-3000:])
    assert unsafe_in_bytes(_content(err, colour=colour)) == [], (name, "stderr", err[-3000:])
    for output in outputs:
        data = (tmp_path / output).read_bytes()
        assert unsafe_in_bytes(data) == [], (name, output)
    # Nothing but the requested output was written (import's capture is binary: read back below).
    written = {p.name for p in tmp_path.iterdir()} - {"imported.dynscope"}
    assert written == set(outputs), (name, written)
    assert not (forged["dir"] / "marker").exists()
    if code == 0 and name.startswith(("summary", "stages", "show", "compare")) and not name.endswith(("json", "md")):
        # Markup in a capture is text: printed as typed (escaped), never interpreted.
        assert "[bold]b[/]" in out.decode("utf-8", "replace"), (name, out[-2000:])


def test_an_imported_hostile_log_reads_back_clean(forged, tmp_path):
    out = tmp_path / "imported.dynscope"
    code, _, err, _ = _run(["import", str(forged["log"]), "-o", str(out)], tmp_path, colour=False)
    assert code == 0, err
    assert b"1 unreadable line" in err
    for argv in (["summary", str(out)], ["summary", str(out), "--json"], ["report", str(out), "--format", "md"],
                 ["report", str(out), "-o", str(tmp_path / "i.html")]):
        code, stdout, stderr, _ = _run(argv, tmp_path, colour=False)
        assert code == 0, (argv, stderr)
        assert unsafe_in_bytes(stdout + stderr) == [], argv
    assert unsafe_in_bytes((tmp_path / "i.html").read_bytes()) == []


def test_lone_surrogates_are_shown_as_escapes_not_an_encoding_crash(tmp_path):
    """JSON can carry "\\ud800", which no output encoding can write: every view shows it as an
    escape instead of ending in exit 70. (Compile ids are kept whole: a lone surrogate there
    fails in the store's queries, dynscope/store's part of issue 20.)"""
    capture = forge_surrogates("graph_breaks_eager", tmp_path, keep=("compile_id",))
    other = forge_surrogates("recompiles_eager", tmp_path, keep=("compile_id",))
    for argv in (["summary", capture], ["summary", capture, "--json"], ["stages", capture],
                 ["report", capture, "--format", "md"], ["report", capture, "--format", "json"],
                 ["report", capture, "-o", tmp_path / "s.html"], ["compare", other, capture, "--json"],
                 ["compare", other, capture, "--md"], ["compare", other, capture],
                 ["check", other, "--max-recompiles", "0", "--format", "github"]):
        code, out, err, _ = _run([str(a) for a in argv], tmp_path, colour=False)
        assert code in (0, 1), (argv, err)
        assert unsafe_in_bytes(out + err) == [], argv
        assert not out or argv[0] == "check" or b"\\ud800" in out, argv  # shown, as an escape
    html = (tmp_path / "s.html").read_bytes()
    assert unsafe_in_bytes(html) == [] and b"\\ud800" in html


def test_json_outputs_keep_the_text_as_escapes(forged, tmp_path):
    """JSON documents carry the capture's strings faithfully, every control character as \\uXXXX."""
    import json

    for argv in (["summary", str(forged["breaks"]), "--json"],
                 ["compare", str(forged["breaks"]), str(forged["kernels"]), "--json"]):
        code, out, err, _ = _run(argv, tmp_path, colour=False)
        assert code == 0, err
        assert b"\\u001b]0;pwned-title" in out, argv
        json.loads(out)  # still a document


def test_github_annotations_cannot_start_a_workflow_command(forged, tmp_path):
    code, out, _, _ = _run(["check", str(forged["recompiles"]), "--max-recompiles", "0", "--format", "github"],
                           tmp_path, colour=False)
    assert code == 1
    lines = out.decode().splitlines()
    assert lines and all(line.startswith(("::error ", "::notice ", "::warning ")) for line in lines), lines
    assert "%0A::error::forged" not in out.decode()  # the capture's "%0A" is itself escaped (%250A)


def _outside_code(markdown: str) -> str:
    """The Markdown a renderer interprets: code blocks and code spans are shown literally."""
    markdown = re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", markdown, flags=re.S | re.M)
    return re.sub(r"(`+)(.+?)\1", "", markdown)


def test_markdown_cannot_inject_html_or_links(forged, tmp_path):
    """Outside code spans, a capture's "<script>", "[link](url)" and "<https://...>" are escaped
    text; a break's docs link is made a link only when it points at torch's documentation."""
    for argv in (["report", str(forged["breaks"]), "--format", "md"],
                 ["compare", str(forged["recompiles"]), str(forged["breaks"]), "--md"]):
        code, out, err, _ = _run(argv, tmp_path, colour=False)
        assert code == 0, err
        text = _outside_code(out.decode())
        assert "[bold]b[/]" not in text and "\\[bold\\]b\\[/\\]" in text, argv  # escaped, so shown as typed
        assert "<script>" not in text and "](https://evil.example/)" not in text, argv
        assert "<https://evil" not in text and "<https://meta-pytorch.github.io/compile-graph-break-site/gb/" \
            not in text, argv  # the forged docs link (its end spoiled) is text, not an autolink


# -- the terminal UI --------------------------------------------------------------------------


_TOUR = Path(__file__).with_name("tui_tour.py")


def _tui_tour(path: Path, cwd: Path) -> tuple[list[tuple[str, list[str]]], str]:
    """Drive every TUI view over ``path`` in a fresh process (under pytest's output capture
    Textual runs several times slower): what each screen showed and the faults found there."""
    result = subprocess.run([sys.executable, str(_TOUR), str(path)], cwd=cwd, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout)
    return [(where, faults) for where, faults in report["seen"]], report["shown"]


@pytest.mark.parametrize("which", ["breaks", "recompiles", "kernels"])  # ids: the CLI sweep
def test_no_control_character_reaches_the_tui_screen(forged, which):
    seen, shown = _tui_tour(forged[which], forged["dir"])
    assert len(seen) > 20
    faulty = [(where, faults) for where, faults in seen if faults]
    assert faulty == [], faulty
    # The screens did show the capture's strings: as escapes.
    assert "\\x1b]0;pwned-title" in shown and HOSTILE not in shown


# -- the recorded command, near the top (issue 20 item 2) -------------------------------------


def test_summary_shows_the_recorded_command_and_where_it_ran_near_its_top(tmp_path):
    """Before anyone reruns a capture's command (dynscope fix --from does), the summary shows
    it: the exact argv, quoted as a shell would read it back, and its working directory."""
    import json
    import sqlite3

    from hostile import small_capture

    capture = small_capture(tmp_path / "c.dynscope")
    argv = ["python", "-m", "timeit", "__import__('os').system('touch marker')", "a b"]
    with sqlite3.connect(capture) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'command'", (json.dumps(argv),))
        db.execute("UPDATE meta SET value = ? WHERE key = 'cwd'", (json.dumps("/ops dir"),))
    code, out, err, _ = _run(["summary", str(capture)], tmp_path, colour=False)
    assert code == 0, err
    second = out.decode().splitlines()[1]
    assert second == ("command: python -m timeit '__import__('\"'\"'os'\"'\"').system('\"'\"'touch marker'\"'\"')' "
                      "'a b'  in /ops dir")
    code, out, err, _ = _run(["summary", str(capture), "--json"], tmp_path, colour=False)
    run = json.loads(out)["run"]
    assert run["command"] == argv and run["cwd"] == "/ops dir"
    code, out, err, _ = _run(["report", str(capture), "--format", "md"], tmp_path, colour=False)
    # the Markdown report names no absolute working directory (issue 42): the command, quoted, alone
    assert out.decode().splitlines()[2].endswith("`python -m timeit '__import__('\"'\"'os'\"'\"').system('\"'\"'touch "
                                                 "marker'\"'\"')' 'a b'`") and "/ops dir" not in out.decode()
    assert not (tmp_path / "marker").exists()


def test_a_newline_in_a_capture_cannot_forge_a_line_of_checks_verdict(tmp_path):
    """`check` prints one line per finding: a break message holding "\\ndynscope check: ok" stays
    on its finding's line, so a CI log shows one verdict, the real one."""
    from fake_capture import FakeCapture
    from hostile import small_capture

    forged_verdict = "x\ndynscope check: ok (0 problems)\n::notice::fine"
    capture = small_capture(tmp_path / "c.dynscope", strings=forged_verdict)
    base = FakeCapture(tmp_path / "base.dynscope").compile("0/0").close()
    for form in ("text", "github"):
        code, out, err, _ = _run(["check", str(capture), "--baseline", str(base), "--format", form], tmp_path,
                                 colour=False)
        assert code == 1, err
        lines = out.decode().splitlines()
        assert [line for line in lines if line.startswith("dynscope check:")] == (
            ["dynscope check: FAIL (1 problem)"] if form == "text" else []), lines
        assert not any(line.startswith("::notice::") for line in lines), lines
