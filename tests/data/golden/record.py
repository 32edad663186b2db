"""Re-record the golden views of the recorded captures (tests/unit/test_golden_views.py).

    python tests/data/golden/record.py

Run it only when a change to what users see is meant; the diff of this folder is then the
change, to be read in review. The views are made in-process, as the test makes them: the
summary JSON (docs/summary-json.md), the terminal summary (120 columns) and the Markdown
report of every capture in tests/data/captures/<version>/.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "tests" / "unit"))

from golden_views import VIEWS, captures, golden_path, render  # noqa: E402


def main() -> None:
    for capture in captures():
        for view in VIEWS:
            path = golden_path(capture, view)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(capture, view))
            print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
