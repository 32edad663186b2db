"""The SQLite file is data, not a program (issue 20: items 6, 14, the reading side of 4 and 13).

Each hostile capture is a real capture rewritten the way an attacker would; each command
runs as its own process, as a user would run it, with its time and peak memory measured.
Every refusal is one line on stderr and exit 2; no file but the requested output changes."""

from __future__ import annotations

import os
import re
import sqlite3
import time
from pathlib import Path

import pytest
from hostile_store import (
    RECURSIVE_VIEW,
    SCHEMA_ATTACKS,
    add_event_with_payload,
    honest_payload,
    nested,
    run_measured,
    set_column,
    set_meta,
    vacuum,
    with_schema,
    with_schema_in_wal,
)
from hostile_store import (
    capture as make_capture,
)

from dynscope.errors import CaptureError
from dynscope.store.reader import CaptureReader

MB = 1024 * 1024
# Python, dynscope and its imports take ~60 MB; the attacks below cost 2.7-3.8 GB before.
SMALL_RSS = 200 * MB
# A refusal comes before any query runs: the recursive view hung forever before.
REFUSED_WITHIN_S = 20
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")

# Every command that reads a capture (the TUI opens it before it needs a terminal).
COMMANDS = {
    "summary": ["summary", "{c}"],
    "summary --json": ["summary", "{c}", "--json"],
    "stages": ["stages", "{c}"],
    "show": ["show", "{c}", "--compile", "0/0", "--stage", "dynamo"],
    "report html": ["report", "{c}", "-o", "{out}/r.html"],
    "report md": ["report", "{c}", "--format", "md"],
    "report json": ["report", "{c}", "--format", "json"],
    "check": ["check", "{c}", "--max-graph-breaks", "0"],
    "timeline": ["timeline", "{c}", "-o", "{out}/t.json"],
    "tui": ["tui", "{c}"],
}


def command(name: str, capture: Path, out: Path) -> list[str]:
    return [a.format(c=capture, out=out) for a in COMMANDS[name]]


def assert_refused(result, *words: str, seconds: float = REFUSED_WITHIN_S, rss: int = SMALL_RSS) -> None:
    code, out, err, peak, took = result
    assert code == 2, (code, err)
    assert err.startswith("dynscope: ") and err.count("\n") == 1, err
    assert "internal error" not in err and "Traceback" not in err, err
    assert not _CONTROL.search(err), repr(err)
    for word in words:
        assert word in err, (word, err)
    assert took < seconds, took
    assert peak < rss, peak


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file's (size, mtime) under ``directory``: what a command must leave alone."""
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in directory.rglob("*") if p.is_file() and p.name not in ("stdout.txt", "stderr.txt", "rss.txt")}


@pytest.fixture
def capture(tmp_path) -> Path:
    return make_capture(tmp_path / "c.dynscope", payload="def forward(x):\n    return x\n" * 20)


# -- item 6: the schema is checked before any query -----------------------------------------

def test_the_recursive_view_attack_is_refused_at_once_by_every_command(capture, tmp_path):
    with_schema(capture, RECURSIVE_VIEW)
    before = snapshot(tmp_path)
    for name in COMMANDS:
        result = run_measured(command(name, capture, tmp_path), tmp_path)
        assert_refused(result, "holds a view 'events'", "refused without running it")
        assert result[1] == "", name
    assert snapshot(tmp_path) == before  # no output written, the capture untouched, no WAL left


@pytest.mark.parametrize("attack", [a for a in SCHEMA_ATTACKS if a != "recursive view as events"])
def test_any_schema_but_the_capture_schema_is_refused(capture, tmp_path, attack):
    with_schema(capture, SCHEMA_ATTACKS[attack])
    expected = {"view as meta": "holds a view 'meta'", "trigger": "holds a trigger 't'",
                "virtual table": "holds a virtual table 'notes'", "extra table": "unexpected table 'extra'",
                "expression index": "unexpected index 'slow'",
                "changed index": "its index 'events_by_name' is not defined as a capture's is",
                "stat table": "unexpected table 'sqlite_stat1'"}[attack]
    assert_refused(run_measured(command("summary", capture, tmp_path), tmp_path), "is not a dynscope capture", expected)


def test_a_view_hidden_in_a_wal_beside_the_capture_is_refused_too(capture, tmp_path):
    hostile = with_schema_in_wal(capture, tmp_path / "w.dynscope", RECURSIVE_VIEW)
    assert Path(str(hostile) + "-wal").stat().st_size > 0
    assert_refused(run_measured(command("summary", hostile, tmp_path), tmp_path), "holds a view 'events'")


def test_an_honest_capture_still_opens_read_only_and_unchanged(capture, tmp_path):
    before = capture.read_bytes()
    code, out, err, _, _ = run_measured(command("summary", capture, tmp_path), tmp_path)
    assert code == 0 and err == "" and "graph break" in out
    assert capture.read_bytes() == before
    assert sorted(p.name for p in tmp_path.glob("c.dynscope*")) == ["c.dynscope"]


def test_every_query_has_a_time_budget(capture):
    # A capture that passed the schema check cannot make a query run long; the budget is the
    # second wall. Here the slow SQL is ours, run through the reader's own query path.
    reader = CaptureReader(capture, query_seconds=0.5)
    started = time.monotonic()
    with pytest.raises(CaptureError, match=r"took longer than 0.5 s: stopped"):
        reader._query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n", ())
    assert time.monotonic() - started < 5
    assert [e.name for e in reader.events()][:1] == ["dynamo_start"]  # the next query has its own budget
    reader.close()


# -- item 6 and 13: every value is checked before it is used --------------------------------

@pytest.mark.parametrize("tamper, words", [
    ("deep metadata", ["event 3's metadata nests deeper than 64 levels"]),
    ("deep meta", ["meta value 'cwd' nests deeper than 64 levels"]),
    ("meta not JSON", ["meta value 'cwd' is not JSON"]),
    ("metadata not JSON", ["event 3's metadata is not JSON"]),
    ("metadata a list", ["event 3's metadata is [1, 2], not a JSON object"]),
    ("metadata an integer", ["event 3's metadata is 7, not a JSON object"]),
    ("compile id a blob", ["event 3's compile_id is b'0/0', not text"]),
    ("attempt text", ["event 3's attempt is 'first', not an integer"]),
    ("ts text", ["event 3's ts is 'noon', not a time"]),
    ("name a blob", ["name is b'dynscope:graph_break', not text"]),
    ("metadata over the length limit", ["holds a value longer than 16 MB"]),
    ("meta key a blob", ["a meta key is b'cwd', not text"]),
])
def test_a_value_of_the_wrong_kind_is_one_line_not_an_internal_error(capture, tmp_path, tamper, words):
    if tamper == "deep metadata":
        set_column(capture, "metadata", nested(100_000))
    elif tamper == "deep meta":
        set_meta(capture, "cwd", nested(100_000))
    elif tamper == "meta not JSON":
        set_meta(capture, "cwd", "not json")
    elif tamper == "metadata not JSON":
        set_column(capture, "metadata", "{'python': 'repr'}")
    elif tamper == "metadata a list":
        set_column(capture, "metadata", "[1, 2]")
    elif tamper == "metadata an integer":
        set_column(capture, "metadata", 7)
    elif tamper == "compile id a blob":  # a TEXT column keeps a BLOB: the integer of the issue
        set_column(capture, "compile_id", b"0/0")
    elif tamper == "attempt text":
        set_column(capture, "attempt", "first")
    elif tamper == "ts text":
        set_column(capture, "ts", "noon")
    elif tamper == "name a blob":
        set_column(capture, "name", b"dynscope:graph_break")
    elif tamper == "metadata over the length limit":
        set_column(capture, "metadata", '{"pad": "' + "x" * (17 * MB) + '"}')
    elif tamper == "meta key a blob":
        with sqlite3.connect(capture) as db:
            db.execute("UPDATE meta SET key = CAST(key AS BLOB) WHERE key = 'cwd'")
        db.close()
    # (`show` of compile 0/0 does not see a row whose compile id is not the text "0/0")
    for name in ("summary", "report json") + (("show",) if tamper != "compile id a blob" else ()):
        assert_refused(run_measured(command(name, capture, tmp_path), tmp_path), *words)


def test_json_nested_just_within_the_bound_is_read(capture, tmp_path):
    set_column(capture, "metadata", '{"gb_type": "x", "deep": ' + nested(60) + "}")
    code, _, err, _, _ = run_measured(command("summary", capture, tmp_path), tmp_path)
    assert code in (0, 1) and err == "", err


# -- item 4, reading side: special files are refused before open ----------------------------

def test_special_files_are_refused_before_open_with_what_they_are(tmp_path):
    fifo = tmp_path / "fifo.dynscope"
    os.mkfifo(fifo)
    (tmp_path / "link.dynscope").symlink_to(fifo)
    (tmp_path / "dir.dynscope").mkdir()
    cases = {str(fifo): "is a FIFO (named pipe), not a capture file",
             str(tmp_path / "link.dynscope"): "is a FIFO (named pipe), not a capture file",
             "/dev/zero": "is a character device, not a capture file",
             "/dev/null": "is a character device, not a capture file",
             str(tmp_path / "dir.dynscope"): "is a directory, not a capture file"}
    for path, words in cases.items():
        for name in ("summary", "report md", "tui"):
            assert_refused(run_measured(command(name, Path(path), tmp_path), tmp_path, timeout=30), words,
                           seconds=10)


# -- item 4: no output overwrites a capture --------------------------------------------------

def test_no_output_overwrites_the_capture_it_reads_or_any_other(capture, tmp_path):
    other = tmp_path / "baseline.data"  # a capture by its header, whatever its name
    other.write_bytes(capture.read_bytes())
    as_html = tmp_path / "run.html"  # a capture named like a report: `report run.html -o run.html`
    as_html.write_bytes(capture.read_bytes())
    (tmp_path / "link.json").symlink_to(other)
    db = sqlite3.connect(tmp_path / "notes.sqlite")
    db.execute("CREATE TABLE t(x)")
    db.commit()
    db.close()
    attempts = {
        ("report", str(as_html), "-o", str(as_html)): "it is the capture",
        ("report", str(capture), "-o", str(capture), "--format", "html"): "it is the capture",
        ("report", str(capture), "-o", str(capture) + "-wal", "--format", "md"): "it is part of",
        ("report", str(capture), "-o", str(other), "--format", "json"): "it is a dynscope capture (by its SQLite header)",
        ("report", str(capture), "-o", str(tmp_path / "link.json")): "it is a dynscope capture",
        ("report", str(capture), "-o", str(tmp_path / "notes.sqlite"), "--format", "md"): "it is an SQLite database",
        ("report", str(capture), "--against", str(other), "-o", str(other), "--format", "md"): "it is the capture",
        ("timeline", str(capture), "-o", str(capture)): "it is the capture",
        ("timeline", str(capture), "-o", str(tmp_path / "link.json")): "it is a dynscope capture",
        ("graph", str(capture), "--compile", "0/0", "--stage", "dynamo", "-o", str(tmp_path / "g.dot")):
            "it is a dynscope capture",
    }
    (tmp_path / "g.dot").write_bytes(capture.read_bytes())
    before = snapshot(tmp_path)
    for args, words in attempts.items():
        assert_refused(run_measured(list(args), tmp_path), "refusing to", words)
    assert snapshot(tmp_path) == before


def test_the_tui_export_never_overwrites_the_capture(tmp_path):
    from tui_pilot import drive

    from dynscope.commands.tui import html_exporter

    capture = make_capture(tmp_path / "run.html")  # `e` writes <capture>.html: here, the capture itself
    before = capture.read_bytes()
    seen = {}

    async def press_e(app, pilot):
        await pilot.press("e")
        await app.workers.wait_for_complete()
        await pilot.pause()
        seen["notes"] = [n.message for n in app._notifications]

    drive(capture, press_e, size=(120, 40), export_html=html_exporter(str(capture)))
    assert capture.read_bytes() == before
    assert any(n.startswith("Export failed: refusing to write") for n in seen["notes"]), seen


# -- item 13: a failed write to stdout ------------------------------------------------------

@pytest.mark.parametrize("name", ["summary", "summary --json", "stages", "report md", "report json", "check"])
def test_stdout_on_a_full_device_is_one_line_and_exit_2(capture, tmp_path, name):
    with open("/dev/full", "wb") as full:
        result = run_measured(command(name, capture, tmp_path), tmp_path, stdout=full)
    assert_refused(result, "cannot write the output to standard output: No space left on device")


# -- item 14: a view does not pay for payloads it does not show -----------------------------

@pytest.fixture(scope="module")
def five_gib_capture(tmp_path_factory) -> Path:
    """~16 MB on disk: five honest 1 GiB payloads (right hash and size), on the output code and
    bytecode the stage list reads only the head of, and on stages `show dynamo` never reads."""
    path = make_capture(tmp_path_factory.mktemp("big") / "big.dynscope")
    for i, name in enumerate(["inductor_output_code", "dynscope:log:bytecode", "dynscope:log:bytecode",
                              "aot_forward_graph", "inductor_post_grad_graph"]):
        head = {1: "ORIGINAL BYTECODE f\n", 2: "MODIFIED BYTECODE f\n"}.get(i, "# AOT ID: ['0_forward']\n")
        add_event_with_payload(path, name, honest_payload(1024, head + f"    x{i} = x{i} + 1\n"))
    vacuum(path)
    return path


def test_five_gib_of_honest_payloads_cost_a_stage_view_nothing(five_gib_capture, tmp_path):
    assert five_gib_capture.stat().st_size < 20 * MB
    for args in (["show", str(five_gib_capture), "--compile", "0/0", "--stage", "dynamo", "--raw"],
                 ["stages", str(five_gib_capture), "--compile", "0/0"],
                 ["summary", str(five_gib_capture)]):
        code, out, err, peak, took = run_measured(args, tmp_path)
        assert code in (0, 1) and err == "", (args, err)
        # Before: each 1 GiB payload was inflated and hashed whole (15 s and more); now at most the
        # view's 32 MB budget of the output code is read (for its kernels), the rest not at all.
        assert took < 10, (args, took)
        assert peak < 400 * MB, (args, peak)
    code, out, *_ = run_measured(["show", str(five_gib_capture), "--compile", "0/0", "--stage", "dynamo", "--raw"],
                                 tmp_path)
    assert out.startswith("def forward(x):")


def test_a_shown_gib_payload_stays_within_the_view_budget(five_gib_capture, tmp_path):
    code, out, err, peak, took = run_measured(
        ["show", str(five_gib_capture), "--compile", "0/0", "--stage", "aot_forward", "--raw"], tmp_path)
    assert code == 0, err
    assert out.rstrip().endswith("… truncated at 33.6 MB of 1073.7 MB")
    assert took < 15 and peak < 400 * MB, (took, peak)
    # The whole report embeds each stage cut at its budget: bounded, not 5 GiB of inflating.
    code, _, err, peak, took = run_measured(["report", str(five_gib_capture), "-o", str(tmp_path / "r.html")], tmp_path)
    assert code == 0, err
    assert took < 30 and peak < 600 * MB, (took, peak)


def test_appending_to_a_capture_refuses_a_schema_with_a_trigger_before_writing(tmp_path):
    """fix --from and minify --from record their results into the capture they were given: a
    trigger planted there must not run on that INSERT."""
    import sqlite3

    from hostile import small_capture

    from dynscope.errors import CaptureError
    from dynscope.store.writer import CaptureWriter

    capture = small_capture(tmp_path / "c.dynscope")
    with sqlite3.connect(capture) as db:
        db.execute("CREATE TABLE spy(x)")
        db.execute("CREATE TRIGGER t AFTER INSERT ON events BEGIN INSERT INTO spy VALUES (1); END")
    with pytest.raises(CaptureError, match="trigger"):
        CaptureWriter.reopen(capture)
    with sqlite3.connect(capture) as db:
        assert db.execute("SELECT count(*) FROM spy").fetchone() == (0,)


def test_a_capture_under_a_directory_name_that_is_not_utf8_opens(tmp_path):
    """Paths are bytes on POSIX: the read-only URI quotes them as bytes."""
    from hostile import small_capture

    from dynscope.store.reader import CaptureReader

    directory = Path(os.fsdecode(bytes(tmp_path) + b"/cwd-\xff"))
    directory.mkdir()
    capture = small_capture(directory / "run.dynscope")
    with CaptureReader(str(capture)) as reader:
        assert reader.meta["torch_version"] == "2.13.0"
