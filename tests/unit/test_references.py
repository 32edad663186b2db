"""Every file of this repository that the code, tests and docs name exists, and none points outside it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A repository path: starts at a top-level folder, not inside a longer path (torch's own
# "torch_compile_debug/*/minifier/minifier_launcher.py" is not ours).
_PATH = re.compile(r"(?<![\w/*.-])((?:tests|docs|bench|examples|dynscope|tui|reporters|minifier|\.ci)/[\w/.-]*\w)")
_SIBLING_TEST = re.compile(r"(?<![\w/])(test_\w+\.py)\b")
_OUTSIDE = re.compile(r"/work/|shared/docs|notes/COMMON")


def _sources() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "pyproject.toml", *sorted((ROOT / "docs").glob("*.md"))]
    for folder in ("dynscope", "tui", "reporters", "minifier", "tests", "bench", "examples", ".ci"):
        found += [p for p in sorted((ROOT / folder).rglob("*")) if p.suffix in (".py", ".md", ".j2", ".toml", "")
                  and p.is_file() and "__pycache__" not in p.parts and "__snapshots__" not in p.parts
                  and not p.is_relative_to(ROOT / "tests" / "data" / "golden")]  # views' text, cut where a view cuts
    return found


def _exists(name: str) -> bool:
    if "*" in name:
        return any(ROOT.glob(name))
    return (ROOT / name).exists()


def _prose(path: Path, text: str) -> str:
    """A test's docstring and comments: where it names other test files (its strings may name files it makes)."""
    docstring = ast.get_docstring(ast.parse(text)) or ""
    return "\n".join([docstring, *(line for line in text.splitlines() if line.lstrip().startswith("#"))])


def test_named_files_exist():
    missing = []
    for path in _sources():
        if path == Path(__file__):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            missing += [f"{path.relative_to(ROOT)}:{number}: {name}" for name in _PATH.findall(line)
                        if not _exists(name.rstrip("."))]
        if path.is_relative_to(ROOT / "tests") and path.suffix == ".py":
            missing += [f"{path.relative_to(ROOT)}: {name}" for name in _SIBLING_TEST.findall(_prose(path, text))
                        if not list((ROOT / "tests").rglob(name))]
    assert missing == []


def test_nothing_points_outside_the_repository():
    outside = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in _sources() if p != Path(__file__)
               for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
               if _OUTSIDE.search(line)]
    assert outside == []


def test_the_check_sees_a_missing_file():
    assert _PATH.findall("see tests/unit/hostile.py and minifier/accuracy.py.") == ["tests/unit/hostile.py",
                                                                                  "minifier/accuracy.py"]
    assert _exists("tests/unit/hostile.py") and not _exists("minifier/accuracy.py")
    assert _PATH.findall("torch_compile_debug/*/minifier/minifier_launcher.py") == []


def test_test_modules_have_unique_names():
    """pytest imports test modules by their base name (the test folders are not packages): two
    files of one name in two layers collide when one process collects both (plain pytest, or one
    xdist worker)."""
    names: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
