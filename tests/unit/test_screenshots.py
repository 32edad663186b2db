"""docs/screenshots/make.py: the README's TUI screenshots come from a recorded capture, and the
README shows every one it makes. (Its Chromium part is not run here: a browser start costs
seconds and tests/integration/test_reports.py drives the page itself in Chromium.)"""

from __future__ import annotations

import html
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "docs" / "screenshots" / "make.py"


def _make() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_screenshots_make", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def svg_text(svg: str) -> str:
    """The terminal's text in Textual's SVG export: tags dropped, entities (&#160; for spaces) read."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " "))


def test_the_graph_breaks_screenshot_shows_the_break_selected(tmp_path: Path) -> None:
    make = _make()
    shot = next(s for s in make.TUI_SHOTS if s.name == "tui-graph-breaks")
    [written] = make.tui_screenshots(tmp_path, shots=(shot,))
    assert written == tmp_path / "tui-graph-breaks.svg"
    shown = svg_text(written.read_text(encoding="utf-8"))
    # The breaks tab is the one shown, and its details name the first break, its line and its GB id.
    assert "3 breaks (4)" in shown
    assert "Failed to trace builtin operator GB0059" in shown
    assert "examples/graph_breaks.py:20 in forward" in shown
    assert shot.title in shown


def test_the_newest_torch_versions_captures_are_used(tmp_path: Path) -> None:
    make = _make()
    for name in ("2.6.0+cu124", "2.11.0+cu130", "2.9.1"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "graph_breaks_eager.dynscope").write_bytes(b"")
    (tmp_path / "3.0.0").mkdir()  # no captures in it
    assert make.newest_captures(tmp_path).name == "2.11.0+cu130"


def test_every_screenshot_is_committed_and_shown_in_the_readme() -> None:
    make = _make()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    names = [f"{shot.name}.svg" for shot in make.TUI_SHOTS] + [f"{make.HTML_SHOT[0]}.png"]
    for name in names:
        assert (SCRIPT.parent / name).is_file(), f"run docs/screenshots/make.py: {name} is missing"
        assert f"docs/screenshots/{name}" in readme, f"the README does not show {name}"
