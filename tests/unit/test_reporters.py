"""Every reporter behind one protocol (reporters/__init__.py): prepared once from the run view,
rendered to any text stream; one capture's facts read the same in every format. No torch."""

from __future__ import annotations

import io
import json

import pytest
from test_events import _crafted

from dynscope.analysis.run_view import run_view
from dynscope.model import Capture
from dynscope.reporters import REPORTERS, ReportOptions, prepare_report


@pytest.fixture
def capture(tmp_path):
    with Capture.open(str(_crafted(tmp_path / "run.dynscope"))) as opened:
        yield opened


def _render(fmt: str, capture: Capture) -> str:
    out = io.StringIO()
    prepare_report(fmt, [capture], ReportOptions()).render(out)
    return out.getvalue()


@pytest.mark.parametrize("fmt", sorted(REPORTERS))
def test_every_format_prepares_then_renders(fmt, capture):
    reporter = prepare_report(fmt, [capture])
    first, second = io.StringIO(), io.StringIO()
    reporter.render(first)
    reporter.render(second)
    text = first.getvalue()
    assert "Unsupported call" in text  # the one readable graph break, in every format
    # and the events it could not read, never dropped silently
    assert ('"not_understood"' if fmt == "json" else "not understood") in text
    if fmt != "html":  # the page carries a fresh nonce each time it is written
        assert second.getvalue() == text


def test_the_formats_agree_on_the_facts(capture):
    document = json.loads(_render("json", capture))
    view = run_view(capture)
    assert document["totals"]["graph_breaks"] == view.totals.graph_breaks == 1
    assert [b["headline"] for b in document["graph_breaks"]] == [g.headline for g in view.break_groups]
    assert [n["kind"] for n in document["not_understood"]] == list(view.not_understood)
    assert "1 graph break (1 distinct)" in _render("terminal", capture)
    assert "| 1 (1 distinct) |" in _render("md", capture)


def test_the_run_view_is_derived_once_per_capture(capture):
    view = run_view(capture)
    assert run_view(capture) is view
    assert view.problems is view.problems and view.break_groups is view.break_groups
    # every view reads the same objects: the problem ranking points at the view's own groups
    [problem] = [p for p in view.problems if p.kind == "graph_break"]
    assert problem.group is view.break_groups[0]
