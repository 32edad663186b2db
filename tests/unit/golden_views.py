"""What users see of each recorded capture, made in-process, for the golden test.

The views run in the checkout's root on the capture's path relative to it, so nothing they
print depends on where the checkout is: the golden files hold the same text on every machine.
(The paths recorded inside a capture are the recording machine's, and shown as they are.)
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "data" / "captures"
GOLDEN = ROOT / "tests" / "data" / "golden"

# view name -> (dynscope argv before the capture path, golden file suffix)
VIEWS: dict[str, tuple[list[str], str]] = {
    "summary-json": (["summary", "--json"], ".summary.json"),
    "summary-text": (["summary"], ".summary.txt"),
    "report-md": (["report", "--format", "md"], ".report.md"),
}


def captures() -> list[Path]:
    return sorted(CAPTURES.glob("*/*.dynscope"))


def golden_path(capture: Path, view: str) -> Path:
    return GOLDEN / capture.parent.name / (capture.stem + VIEWS[view][1])


def render(capture: Path, view: str) -> str:
    from dynscope.commands import main

    argv, _ = VIEWS[view]
    out = io.StringIO()
    old_columns = os.environ.get("COLUMNS")
    old_cwd = os.getcwd()
    os.environ["COLUMNS"] = "120"
    os.chdir(ROOT)  # source excerpts are read under the reader's cwd
    try:
        with contextlib.redirect_stdout(out):
            code = main([*argv, str(capture.relative_to(ROOT))])
    finally:
        os.chdir(old_cwd)
        if old_columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old_columns
    assert code == 0, f"dynscope {' '.join(argv)} {capture} exited {code}"
    return out.getvalue()
