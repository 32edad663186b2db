"""Reports: a self-contained HTML file checked in a real browser, Markdown for issues, JSON and `check` for CI."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import zlib
from pathlib import Path

import pytest
from browser import Browser, open_browser
from conftest import EXAMPLES, needs_program, run_dynscope
from markdown_it import MarkdownIt
from recorded_tui import recorded

from dynscope.model import Capture
from dynscope.reporters.markdown import markdown_report

PROGRAMS = Path(__file__).parent.parent / "programs"
needs_chromium = needs_program("chromium", "chromium-browser", "google-chrome")
PWNED = "window.__pwned=1"


@pytest.fixture(scope="module")
def browser():
    yield from open_browser()


def report(tmp_path: Path, *captures: Path, name: str = "report.html") -> Path:
    out = tmp_path / name
    result = run_dynscope("report", *map(str, captures), "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out


def assert_offline_and_clean(b: Browser, page: Path) -> None:
    """No console errors, no exceptions, no request but the page itself and data: images."""
    assert b.errors() == []
    outside = [url for url in b.requests if url != page.resolve().as_uri() and not url.startswith("data:")]
    assert outside == []


# -- HTML in a browser ------------------------------------------------------------------------


@needs_chromium
@pytest.mark.inductor
def test_html_report_of_a_training_compile_in_a_browser(make_capture, browser, tmp_path):
    b = browser
    page = report(tmp_path, make_capture("conv_net.py", "--backend", "inductor"))
    assert b"http://" not in page.read_bytes().replace(b"http://www.w3.org", b"")  # nothing to fetch
    b.open(page)
    assert b.visible("#r0-overview") and b.evaluate("document.title").startswith("torch.compile report")

    # Open the compile: its stages step in pipeline order with n / p.
    b.click("#r0-compiles button.open")
    b.wait_for("document.querySelector('.stage-tab.active')")
    tabs = b.evaluate("[...document.querySelectorAll('.stage-tab')].map(t => t.dataset.stage)")
    assert tabs[:3] == ["bytecode", "dynamo", "pre_grad"] and "output_code.backward" in tabs
    b.press("n")
    assert b.evaluate("document.querySelector('.stage-tab.active').dataset.stage") == "dynamo"
    assert "gelu" in b.evaluate("document.querySelector('.stage-panel pre.code').textContent")
    b.press("p")
    assert b.evaluate("document.querySelector('.stage-tab.active').dataset.stage") == "bytecode"

    # A stage tab: post_grad shows its diff from the AOT forward graph, and its graph.
    b.click('.stage-tab[data-stage="post_grad"]')
    b.click('.view-btn[data-view="diff"]')
    assert "from aot_forward" in b.evaluate("document.querySelector('.view-btn.active').textContent")
    assert "→ kernel cpp_fused" in b.evaluate("document.querySelector('.stage-diff').textContent")
    assert b.visible(".stage-panel .graph img")

    # A kernel: its post-grad nodes are highlighted, and the user's gelu line is marked.
    gelu_line = next(i for i, line in enumerate((EXAMPLES / "conv_net.py").read_text().splitlines(), 1) if "F.gelu(" in line)
    b.click('.stage-tab[data-stage^="kernel:cpp_fused__native_batch_norm"]')
    assert b.visible(".provenance")
    highlighted = b.evaluate("[...document.querySelectorAll('.provenance .chip.hl')].map(c => c.textContent)")
    assert "erf" in highlighted
    marked = b.evaluate("[...document.querySelectorAll('.provenance .marked')].map(l => l.textContent)")
    assert any(line.startswith(str(gelu_line)) and "F.gelu(" in line for line in marked)
    b.click('.provenance .chip[data-node="erf"]')  # jumps to the post-grad nodes, highlighted
    assert b.evaluate("document.querySelector('.stage-tab.active').dataset.stage") == "post_grad"
    assert b.visible('tr.hl[data-node="erf"]')

    b.screenshot(tmp_path / "report.png")
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert_offline_and_clean(b, page)


@needs_chromium
def test_graph_breaks_and_recompiles_open_with_their_source_line(make_capture, browser, tmp_path):
    b = browser
    page = report(tmp_path, make_capture("graph_breaks.py", "--backend", "aot_eager"))
    b.open(page)
    problems = b.evaluate("[...document.querySelectorAll('ol.problems li')].map(l => l.textContent)")
    assert len(problems) == 4 and all("graph break" in p for p in problems)
    # Clicking a top problem opens the break it names, with the source line marked.
    assert not b.visible("#r0-break-0-details")
    b.click("ol.problems a")
    assert b.visible("#r0-break-0-details")
    marked = b.evaluate("document.querySelector('#r0-break-0-details .marked').textContent")
    assert 'print("block output mean computed")' in marked
    assert b.visible("#r0-break-0-details .hints")
    assert_offline_and_clean(b, page)

    page = report(tmp_path, make_capture("recompiles.py", "--backend", "eager"), name="recompiles.html")
    b.open(page)
    heads = b.evaluate("[...document.querySelectorAll('.recompile .item-head')].map(h => h.textContent)")
    assert len(heads) == 4 and any("self.mode == 'sum'" in h for h in heads)
    mode = next(i for i, h in enumerate(heads) if "self.mode" in h)
    b.click(f"#r0-recompile-{mode} .item-head")
    row = b.evaluate(f"document.querySelector('#r0-recompile-{mode}-details tbody tr').textContent")
    assert "'sum'" in row and "'max'" in row  # expected vs actual
    assert_offline_and_clean(b, page)


# -- hostile strings ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_capture(tmp_path_factory) -> Path:
    """A real run from a directory named with markup, quotes and a non-UTF-8 byte, whose graph-break
    message and source line carry markup; then node names and kernel code are tampered with, as a
    crafted capture file could be."""
    root = tmp_path_factory.mktemp("hostile")
    script_dir = root / 'src<img src=x onerror=window.__pwned=1>"\''
    run_dir = Path(os.fsdecode(bytes(root) + b"/cwd-\xff"))
    script_dir.mkdir()
    run_dir.mkdir()
    shutil.copy(PROGRAMS / "hostile_strings.py", script_dir)
    capture = run_dir / "run.dynscope"
    result = run_dynscope("explain", "--cold", "-q", "-o", str(capture), str(script_dir / "hostile_strings.py"),
                          cwd=run_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    tamper(capture, {'"name":"relu"': '"name":"relu</textarea><script>window.__pwned=1</script>"',
                     "#include": "// </textarea><script>window.__pwned=1</script>\n#include"})
    return capture


def tamper(capture: Path, replacements: dict[str, str]) -> None:
    """Rewrite payloads the way a careful attacker would: with their size and hash made to match
    (a payload that does not match its row is refused as corrupt: tests/unit/test_hostile_captures.py)."""
    from dynscope.store.writer import payload_hash

    db = sqlite3.connect(capture)
    changed = 0
    for digest, codec, data in db.execute("SELECT hash, codec, data FROM blobs").fetchall():
        text = (zlib.decompress(data) if codec == "zlib" else bytes(data)).decode("utf-8", "surrogatepass")
        new = text
        for old, hostile in replacements.items():
            new = new.replace(old, hostile)
        if new != text:
            changed += 1
            raw = new.encode("utf-8", "surrogatepass")
            forged = payload_hash(new)
            db.execute("INSERT OR REPLACE INTO blobs(hash, codec, size, data) VALUES (?, 'raw', ?, ?)",
                       (forged, len(raw), raw))
            db.execute("UPDATE events SET payload = ? WHERE payload = ?", (forged, digest))
            db.execute("DELETE FROM blobs WHERE hash = ?", (digest,))
    db.commit()
    db.close()
    assert changed >= 2


@needs_chromium
@pytest.mark.inductor
def test_hostile_strings_are_shown_as_text_and_never_run(hostile_capture, browser, tmp_path):
    b = browser
    page = report(tmp_path, hostile_capture)
    b.open(page)
    b.click("#r0-break-0 .item-head")
    for button in b.evaluate("[...document.querySelectorAll('button.open')].map(o => o.dataset.toggle)"):
        b.click(f'button.open[data-toggle="{button}"]')
    b.wait_for("document.querySelector('.stage-tab.active')")
    b.click('.stage-tab[data-stage="dynamo"]')
    b.click('.stage-panel .node-table summary')
    dynamo_text = b.evaluate("document.querySelector('.stage-panel').innerText")
    b.click('.stage-tab[data-stage^="kernel:cpp_fused"]')
    kernel_text = b.evaluate("document.querySelector('.stage-panel').innerText")
    page_text = b.evaluate("document.body.innerText")

    assert b.evaluate("typeof window.__pwned") == "undefined"
    assert b.evaluate("document.querySelectorAll('img[onerror], [onerror], textarea').length") == 0
    # Only our own script runs; the others are inert payloads of type application/octet-stream.
    assert b.evaluate("[...document.scripts].filter(s => s.type !== 'application/octet-stream').length") == 1
    # The strings are there, as text: in the break message, the file path, a node name, the kernel code.
    assert "Message: </textarea><script>window.__pwned=1</script><img src=x" in page_text
    assert 'src<img src=x onerror=window.__pwned=1>"\'/hostile_strings.py' in page_text
    assert "\\udcff" in page_text or "\ufffd" in page_text  # the non-UTF-8 byte, visibly escaped
    assert "relu</textarea><script>window.__pwned=1</script>" in dynamo_text
    assert "// </textarea><script>window.__pwned=1</script>" in kernel_text
    assert_offline_and_clean(b, page)


@pytest.mark.inductor
def test_hostile_strings_in_markdown_stay_text(hostile_capture):
    with Capture.open(str(hostile_capture)) as capture:
        text = markdown_report([capture])
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    assert "<script" not in html and "<img" not in html and "<textarea" not in html.replace("&lt;textarea", "")
    assert "&lt;script&gt;" in html  # shown, escaped
    tags = set(re.findall(r"</?([a-z0-9]+)", html))
    assert tags <= {"h2", "h3", "h4", "p", "table", "thead", "tbody", "tr", "th", "td", "ol", "ul", "li", "code",
                    "strong", "em", "details", "summary", "a"}


# -- Markdown, JSON, check -----------------------------------------------------------------------
# (on recorded captures, tests/data/tui: graph_breaks.py with aot_eager, recompiles.py with eager)


def test_markdown_renders_as_a_github_issue_would_show_it():
    with Capture.open(str(recorded("breaks"))) as capture:
        text = markdown_report([capture])
        tokens = MarkdownIt("commonmark", {"html": True}).enable("table").parse(text)
        breaks = capture.graph_breaks()
    assert len(text) < 60_000
    headings = [t for i, t in enumerate(tokens) if i and tokens[i - 1].type == "heading_open" and t.type == "inline"]
    assert [h.content for h in headings] == ["torch.compile report (dynscope)", "Graph breaks"]
    assert sum(1 for t in tokens if t.type == "table_open") == 2  # the counts, and compile time by frame
    (breaks_list,) = [t for t in tokens if t.type == "ordered_list_open"]
    items = [t for t in tokens if t.type == "list_item_open" and t.level == breaks_list.level + 1]
    assert len(items) == len(breaks) == 4
    # Each break names its file:line in a code span, and its details fold away.
    spans = [c.content for t in tokens if t.type == "inline" for c in t.children or () if c.type == "code_inline"]
    for b in breaks:
        assert any(span.endswith(f"graph_breaks.py:{b.location.line}") for span in spans)
    assert text.count("<details>") == text.count("</details>") == 4 + 1


def test_markdown_stays_under_its_size_cap_and_says_what_it_left_out():
    with Capture.open(str(recorded("breaks"))) as capture:
        full = markdown_report([capture])
        small = markdown_report([capture], size_cap=1500)
    assert len(small) <= 1500 < len(full)
    assert re.search(r"\d+ more items were left out to stay under 1,500 characters", small)
    assert small.count("<details>") == small.count("</details>")


def test_json_report_and_check_for_ci(tmp_path):
    capture = recorded("breaks")
    out = tmp_path / "r.json"
    assert run_dynscope("report", str(capture), "-o", str(out)).returncode == 0
    doc = json.loads(out.read_text())
    summary = json.loads(run_dynscope("summary", str(capture), "--json").stdout)
    assert doc["schema"] == "dynscope.report/1"
    assert doc["graph_breaks"] == summary["graph_breaks"] and doc["totals"] == summary["totals"]
    first = doc["compiles"][0]
    keys = [s["key"] for s in first["pipeline"]]
    assert keys[:2] == ["bytecode", "dynamo"] and "aot_inference" in keys
    missing = {s["key"]: s["missing_reason"] for s in first["pipeline"] if not s["recorded"]}
    assert "backend does not use Inductor" in missing["post_grad"]

    over = run_dynscope("check", str(capture), "--max-graph-breaks", "3", "--max-recompiles", "0")
    assert over.returncode == 1
    assert "4 graph breaks (at most 3 allowed): FAIL" in over.stdout and "0 recompiles (at most 0 allowed): ok" in over.stdout
    assert run_dynscope("check", str(capture), "--max-graph-breaks", "4").returncode == 0
    recompiles = recorded("recompiles")
    assert run_dynscope("check", str(recompiles), "--max-recompiles", "3").returncode == 1


@pytest.mark.parametrize("args, expected", [
    (["check", "{capture}"], "give at least one limit"),
    (["report", "{capture}"], "say where the report goes"),
    (["report", "{capture}", "-o", "r.txt"], "cannot tell the report format"),
    (["report", "{capture}", "--format", "html"], "an HTML report needs a file"),
    (["report", "{notes}", "-o", "r.html"], "is not a dynscope capture"),
])
def test_report_and_check_bad_input_gets_one_line(tmp_path, args, expected):
    (tmp_path / "notes.txt").write_text("hello\n")
    values = {"capture": recorded("recompiles"), "notes": tmp_path / "notes.txt"}
    result = run_dynscope(*[a.format(**values) for a in args], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("dynscope: ") and result.stderr.count("\n") == 1 and expected in result.stderr


def test_explain_writes_the_html_report_after_the_run(tmp_path):
    page = tmp_path / "r.html"
    result = run_dynscope("explain", "-q", "-o", str(tmp_path / "r.dynscope"), "--html", str(page),
                          str(EXAMPLES / "graph_breaks.py"), "--backend", "eager", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    html = page.read_text()
    assert f"wrote {page}" in result.stderr
    assert html.count('class="item break"') == 4 and "Content-Security-Policy" in html
