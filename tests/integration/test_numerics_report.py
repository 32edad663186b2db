"""The HTML report's numerics section in a real browser: the error along the graph as inline SVG, the
first suspect marked on its node, growth and nondeterminism marked apart, and every name from the
capture shown as text. The captures are written through the contract (tests/unit/numerics_captures.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from browser import Browser, open_browser
from conftest import REPO, needs_program, run_dynscope

sys.path.insert(0, str(REPO / "tests" / "unit"))
import numerics_captures  # noqa: E402

SOURCE = numerics_captures.SOURCE_FILE  # the relu example's file, as the capture names it

needs_chromium = needs_program("chromium", "chromium-browser", "google-chrome")


@pytest.fixture(scope="module")
def browser():
    yield from open_browser()


def _report(capture: Path, out: Path) -> Path:
    result = run_dynscope("report", str(capture), "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out


def _marks(b: Browser, mark: str) -> list[str]:
    return b.evaluate(f"[...document.querySelectorAll('#r0-numerics [data-mark={mark}]')]"
                      ".map(e => e.closest('.numerics-node').dataset.node)")


@needs_chromium
def test_the_error_plot_marks_the_first_suspect_and_shows_names_as_text(browser, tmp_path):
    b = browser
    page = _report(numerics_captures.relu_bug(tmp_path / "relu_bug.dynscope"), tmp_path / "relu.html")
    b.open(page)
    assert b.visible("#r0-numerics svg.numerics-plot")
    # the first suspect: marked at the relu's x, named in the plot and in the facts above it
    suspect = b.evaluate("(() => { const g = document.querySelector('#r0-numerics [data-mark=first-suspect]');"
                         " return [g.dataset.node, g.textContent, +g.querySelector('line').getAttribute('x1')]; })()")
    relu_x = b.evaluate("+document.querySelector('#r0-numerics .numerics-node[data-index=\"5\"] [data-mark=suspect]')"
                        ".getAttribute('cx')")
    assert suspect[:2] == ["relu", "first suspect: relu"] and suspect[2] == relu_x
    facts = b.evaluate("document.querySelector('#r0-numerics table.facts').innerText")
    assert "cpp_fused_relu_0" in facts and f"{SOURCE}:17" in facts
    assert _marks(b, "growth") == ["relu", "mm_1", "sum_2"]
    assert _marks(b, "suspect") == ["relu", "mul_1", "add_1", "mm_1", "add_2", "sum_2"]
    assert _marks(b, "nondeterministic") == []
    # the hostile kernel name is text: in the tooltip and the node table, its escape visible, nothing run
    b.click("#r0-numerics details.node-table summary")
    table = b.evaluate("document.querySelector('#r0-numerics table.numerics-nodes').innerText")
    assert "cpp_<script>alert(1)</script>_\\x1b[31mred" in table
    assert b.evaluate("document.querySelectorAll('#r0-numerics script').length") == 0
    assert b.errors() == []


@needs_chromium
def test_nondeterministic_nodes_are_marked_apart_and_nothing_is_blamed(browser, tmp_path):
    b = browser
    page = _report(numerics_captures.nondeterministic(tmp_path / "nd.dynscope"), tmp_path / "nd.html")
    b.open(page)
    assert _marks(b, "nondeterministic") == ["scatter_add"]
    assert _marks(b, "suspect") == [] and b.evaluate("document.querySelector('[data-mark=first-suspect]')") is None
    assert b.evaluate("document.querySelector('#r0-numerics .numerics-verdict').innerText").startswith("nondeterministic")
    assert b.errors() == []
