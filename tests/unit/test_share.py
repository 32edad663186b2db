"""dynscope share on the recorded captures of every torch version (no torch): no source line and
no absolute path of the original survives anywhere in the bundle (the raw SQLite bytes, every
row, every payload inflated as the store compresses it), and every view opens the bundle.

The secrets are found independently of dynscope.share: the lines of the example programs (from
examples/, as the test reads them) and every frame's source field in the original; the absolute
paths are every path-looking string of the original, meta, metadata and payloads alike.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from share_checks import leaks, secrets_of, stored_texts

from dynscope.commands import main
from dynscope.share.bundle import ShareOptions, share_capture
from dynscope.share.paths import PathMapper
from dynscope.share.sources import SourceScrubber

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "data" / "captures"
VERSIONS = sorted(p.name for p in CAPTURES.iterdir() if p.is_dir() and any(p.glob("*.dynscope")))
SCRIPTS = {"graph_breaks_eager": "graph_breaks.py", "recompiles_eager": "recompiles.py",
           "train_loop_aot_eager": "train_loop.py", "conv_net_inductor": "conv_net.py"}
CASES = [(v, c) for v in VERSIONS for c in SCRIPTS]


@contextmanager
def in_directory(path: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


_shared: dict[tuple[str, str, bool], tuple[Path, object]] = {}


def shared(version: str, case: str, tmp_path_factory: pytest.TempPathFactory, *, drop_stages: bool = False):
    key = (version, case, drop_stages)
    if key not in _shared:
        out = tmp_path_factory.mktemp("share") / f"{case}{'-nostages' if drop_stages else ''}.dynscope"
        with in_directory(ROOT):  # a checkout of the program: share learns the examples' lines here
            report = share_capture(str(CAPTURES / version / f"{case}.dynscope"), str(out),
                                   ShareOptions(drop_stages=drop_stages))
        _shared[key] = (out, report)
    return _shared[key]


@pytest.mark.parametrize("version, case", CASES)
def test_no_source_line_and_no_absolute_path_survives(version, case, tmp_path_factory):
    original = CAPTURES / version / f"{case}.dynscope"
    lines, paths = secrets_of(original, [ROOT / "examples" / SCRIPTS[case]])
    assert lines and paths  # the original holds both, or this test proves nothing
    assert leaks(original, lines, paths)
    bundle, report = shared(version, case, tmp_path_factory)
    assert leaks(bundle, lines, paths) == []
    assert report.source_lines > 0 and report.paths["relative"] > 0
    assert {"cwd", "command", "hostname", "pid"} <= set(report.meta_removed)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_view_opens_a_bundle(version, tmp_path_factory, tmp_path, capsys):
    bundle, _ = shared(version, "graph_breaks_eager", tmp_path_factory)
    original = CAPTURES / version / "graph_breaks_eager.dynscope"
    assert main(["summary", str(bundle)]) == 0
    assert "examples/graph_breaks.py:20" in capsys.readouterr().out
    assert main(["summary", "--json", str(bundle)]) == 0
    doc = json.loads(capsys.readouterr().out)
    theirs = json.loads(_summary_json(original, capsys))
    # The bundle tells the same story: the same problems at the same (now relative) places.
    assert [(b["line"], b["count"], b["gb_id"]) for b in doc["graph_breaks"]] == \
        [(b["line"], b["count"], b["gb_id"]) for b in theirs["graph_breaks"]]
    assert {b["file"] for b in doc["graph_breaks"]} == {"examples/graph_breaks.py"}
    assert doc["run"]["command"] == [] and doc["run"]["cwd"] is None
    assert doc["totals"] == theirs["totals"]
    for fmt in ("md", "html"):
        out = tmp_path / f"report.{fmt}"
        assert main(["report", str(bundle), "-o", str(out)]) == 0
        assert "graph_breaks.py" in out.read_text()
    capsys.readouterr()
    # Compared with its original: the same breaks at the same places (paths are compared relative
    # to each run's tree). A break whose type names a path (torch 2.6: "skip function graph_break in
    # file /…/decorators.py") reads as one removed and one added at the same line.
    assert main(["compare", str(original), str(bundle), "--json"]) == 0
    breaks = json.loads(capsys.readouterr().out)["graph_breaks"]
    assert sorted(Path(b["file"]).name + f":{b['line']}" for b in breaks["added"]) == \
        sorted(Path(b["file"]).name + f":{b['line']}" for b in breaks["removed"])
    assert len(breaks["added"]) <= 1
    assert main(["compare", str(bundle), str(bundle)]) == 0
    capsys.readouterr()
    stages_bundle, _ = shared(version, "conv_net_inductor", tmp_path_factory, drop_stages=True)
    assert main(["summary", str(stages_bundle)]) == 0
    assert main(["stages", str(stages_bundle), "--compile", "0/0"]) == 0


def _summary_json(path: Path, capsys) -> str:
    capsys.readouterr()
    assert main(["summary", "--json", str(path)]) == 0
    return capsys.readouterr().out


_TUI_ROUTES = """
import asyncio, sys
from dynscope.model import Capture
from dynscope.tui.app import DynscopeApp
sys.path.insert(0, sys.argv[2])
from tui_pilot import settle

async def main():
    with Capture.open(sys.argv[1]) as capture:
        app = DynscopeApp(capture, export_html=lambda out: None)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(app, pilot)
            seen = [type(app.screen).__name__]
            await pilot.press("down", "enter")
            await settle(app, pilot)
            seen.append(type(app.screen).__name__)
            for key in "12345":
                await pilot.press(key)
                await settle(app, pilot)
                seen.append(type(app.screen).__name__)
            print(" ".join(seen))

asyncio.run(main())
"""


def test_the_tui_opens_a_bundle_and_routes_through_its_views(tmp_path_factory):
    bundle, _ = shared(VERSIONS[-1], "graph_breaks_eager", tmp_path_factory)
    done = subprocess.run([sys.executable, "-c", _TUI_ROUTES, str(bundle), str(ROOT / "tests")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(done.stdout.split()) == 7


def test_drop_stages_drops_the_stage_payloads_only(tmp_path_factory):
    bundle, report = shared(VERSIONS[-1], "conv_net_inductor", tmp_path_factory, drop_stages=True)
    assert report.stage_payloads_dropped > 5
    db = sqlite3.connect(f"file:{bundle}?mode=ro", uri=True)
    kept = {name for (name,) in db.execute("SELECT DISTINCT name FROM events WHERE payload IS NOT NULL")}
    assert "inductor_output_code" not in kept and "dynamo_output_graph" not in kept
    assert db.execute("SELECT count(*) FROM events WHERE name = 'inductor_output_code'").fetchone()[0] > 0


def test_paths_are_named_by_where_they_are():
    mapper = PathMapper("/home/ann/proj", b"salt")
    assert mapper.map_path("/home/ann/proj/src/m.py") == "src/m.py"
    assert mapper.map_path("/home/ann/proj/.venv/lib/python3.11/site-packages/torch/nn/f.py") == \
        "<site-packages>/torch/nn/f.py"
    assert mapper.map_path("/usr/lib/python3.11/logging/__init__.py") == "<stdlib>/logging/__init__.py"
    hidden = mapper.map_path("/home/ann/secret/x.py")
    assert re.fullmatch(r"<path:[0-9a-f]{10}>", hidden) and mapper.map_path("/home/ann/secret/x.py") == hidden
    assert PathMapper("/home/ann/proj", b"other").map_path("/home/ann/secret/x.py") != hidden  # salted
    mapper.learn(["/home/ann/proj/src/m.py", "/tmp/t/k.py"])
    # torch's shortened paths in guard comments, one character too far when the common directory is /
    assert mapper.map_text("# y = f(x)  # ome/ann/proj/src/m.py:12 in f; mp/t/k.py:1; src/m.py:2") == \
        f"# y = f(x)  # src/m.py:12 in f; {mapper.map_path('/tmp/t/k.py')}:1; src/m.py:2"
    mapper.learn(["/home/ann/my data/x.py"])
    assert mapper.map_text('File "/home/ann/my data/x.py", line 3 see https://pytorch.org/docs/a/b, x // 2') == \
        f'File "{mapper.map_path("/home/ann/my data/x.py")}", line 3 see https://pytorch.org/docs/a/b, x // 2'


def test_source_in_torch_formats_is_replaced():
    scrubber = SourceScrubber(b"salt")
    text = ('  File "/a/m.py", line 3, in f\n    y = secret_model(x)\n    ^^^^\n'
            "# File: /a/m.py:4 in f, code: z = other(y)\n"
            "| +- TENSOR_MATCH: check_tensor(L['x'])  # w = guarded(x)  # m.py:5 in f\n")
    scrubber.find_quoted(text)
    scrubbed = scrubber.scrub(text + "elsewhere: y = secret_model(x)\n")
    for line in ("y = secret_model(x)", "z = other(y)", "w = guarded(x)"):
        assert line not in scrubbed
    assert "check_tensor(L['x'])" in scrubbed and "m.py:5 in f" in scrubbed and "^^^^" in scrubbed
    assert scrubbed.count(scrubber.token("y = secret_model(x)")) == 2


def test_share_refuses_to_overwrite_its_input_or_a_non_capture(tmp_path, capsys):
    original = CAPTURES / VERSIONS[-1] / "recompiles_eager.dynscope"
    copy = tmp_path / "c.dynscope"
    copy.write_bytes(original.read_bytes())
    assert main(["share", str(copy), "-o", str(copy)]) == 2
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    assert main(["share", str(copy), "-o", str(notes)]) == 2
    assert notes.read_text() == "mine"
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "Traceback" not in err


def test_a_strangers_payload_cannot_make_scrubbing_slow():
    """Torch's formats are looked for line by line up to a length (their patterns rescan a line
    per "#"), and thousands of remembered lines cost one pass (a trie, not a flat alternation)."""
    import time

    scrubber = SourceScrubber(b"salt")
    scrubber.remember(f"value_{i} = compute_{i}(x, y)" for i in range(5000))
    hostile = "# File a, code: " * 100_000 + "\n" + "value_4999 = compute_4999(x, y)\n" * 1000
    start = time.monotonic()
    scrubbed = scrubber.scrub(hostile)
    assert time.monotonic() - start < 20  # quadratic would take hours
    assert "compute_4999" not in scrubbed and scrubbed.count("<source:") == 1000


def test_a_hostile_capture_is_shared_safely_or_refused_in_one_line(tmp_path, capsys):
    from hostile import blobs, replace_blob, small_capture, zlib_bomb

    evil = "\x1b]0;pwned\x07/home/eve/\u202e.ssh/id_rsa \x1b[2J"
    capture = small_capture(tmp_path / "c.dynscope", strings=evil)
    out = tmp_path / "b.dynscope"
    assert main(["share", str(capture), "-o", str(out), "--tree", str(tmp_path)]) == 0
    printed = capsys.readouterr()
    assert "\x1b" not in printed.out + printed.err and "\u202e" not in printed.out
    assert not any(evil in text or "/home/eve" in text for text in stored_texts(out))
    assert main(["summary", str(out)]) == 0
    capsys.readouterr()
    # A payload that inflates past its declared size: the share stops, in one line, and writes nothing usable.
    (digest, _codec, size), = blobs(capture)
    replace_blob(capture, digest, codec="zlib", size=size, data=zlib_bomb(8 << 20))
    out.unlink()
    assert main(["share", str(capture), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is corrupt" in err
    assert not out.exists()
