"""What users see does not change unless a change means it to.

The summary JSON (docs/summary-json.md), the terminal summary and the Markdown report of every
recorded capture are compared, text for text, with the golden files recorded before a change
(tests/data/golden/record.py). A refactor passes unchanged; a change that means to alter a view
re-records them, and the diff of tests/data/golden is the change a reviewer reads.
"""

from __future__ import annotations

import json

import pytest
from golden_views import VIEWS, captures, golden_path, render

CASES = [(capture, view) for capture in captures() for view in VIEWS]


def test_every_recorded_capture_has_its_golden_views():
    assert len(captures()) >= 16
    missing = [str(golden_path(c, v)) for c, v in CASES if not golden_path(c, v).is_file()]
    assert not missing, f"re-record with tests/data/golden/record.py: {missing}"


@pytest.mark.parametrize(("capture", "view"), CASES, ids=[f"{c.parent.name}/{c.stem}/{v}" for c, v in CASES])
def test_view_equals_its_golden_file(capture, view):
    got = render(capture, view)
    want = golden_path(capture, view).read_text()
    if view == "summary-json":
        # field for field first, so a failure names the field
        got_doc, want_doc = json.loads(got), json.loads(want)
        assert got_doc.keys() == want_doc.keys()
        for key in want_doc:
            assert got_doc[key] == want_doc[key], f"summary JSON field {key!r} changed"
    assert got == want
