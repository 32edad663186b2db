"""docs/commands/: one page per command, current with the command line (no torch)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "commands"


def _maker():
    spec = importlib.util.spec_from_file_location("make_command_pages", PAGES / "make.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_command_has_a_current_page():
    from dynscope.commands import SUBCOMMANDS

    maker = _maker()
    assert set(maker.PAGES_BY_COMMAND) == set(SUBCOMMANDS), "a command without a page (or a page without a command)"
    stale = [name for name, text in maker.expected_pages().items()
             if not (PAGES / name).exists() or (PAGES / name).read_text() != text]
    assert stale == [], f"run `python docs/commands/make.py`: {stale} differ from the command line"


def test_the_pages_are_linked_from_the_readme_and_say_what_matters():
    assert "docs/commands/README.md" in (ROOT / "README.md").read_text()
    index = (PAGES / "README.md").read_text()
    for page in PAGES.glob("*.md"):
        if page.name == "README.md":
            continue
        text = page.read_text()
        assert f"]({page.name})" in index
        for section in ("## Usage and options", "## Exit status", "## Example", "usage: dynscope "):
            assert section in text, (page.name, section)
