"""dynscope fix's code stays small enough to change (issue 40): read with ``ast``, no import.

Every function in dynscope/fix/ and the remedy table's modules fits in 80 lines, every such file
in 450, and no nested function shares state with its outer one through a one-element list
(``done = [0]`` … ``done[0] += 1``): state a run keeps is a field of the scheduler.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 450


def _files() -> list[Path]:
    analysis = ROOT / "dynscope" / "analysis"
    files = sorted((ROOT / "dynscope" / "fix").glob("*.py"))
    files += [analysis / "remedies.py", analysis / "fix_problems.py", analysis / "fix_view.py",
              *sorted(analysis.glob("remedy_*.py"))]
    return files


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _shared_cells(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Names an inner function writes through ``name[0]`` that it does not bind itself: a cell shared
    with the enclosing function."""
    found = []
    for inner in _functions(function):
        if inner is function:
            continue
        bound = {a.arg for a in inner.args.args + inner.args.kwonlyargs}
        bound |= {t.id for n in ast.walk(inner) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        for node in ast.walk(inner):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
            for target in targets:
                if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                        and isinstance(target.slice, ast.Constant) and target.slice.value == 0
                        and target.value.id not in bound):
                    found.append(f"{inner.name} writes {target.value.id}[0] (line {node.lineno})")
    return found


def test_the_files_are_the_ones_meant():
    names = {p.name for p in _files()}
    assert {"session.py", "plan.py", "scheduler.py", "speculation.py", "remedies.py", "remedy_applies.py",
            "remedy_patches.py", "remedy_hints.py", "fix_problems.py"} <= names


def test_no_function_longer_than_80_lines():
    long = []
    for path in _files():
        for f in _functions(ast.parse(path.read_text())):
            start = min([f.lineno] + [d.lineno for d in f.decorator_list])
            length = (f.end_lineno or f.lineno) - start + 1
            if length > MAX_FUNCTION_LINES:
                long.append(f"{path.relative_to(ROOT)}:{f.lineno} {f.name}: {length} lines")
    assert not long, long


def test_no_file_longer_than_450_lines():
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in _files()
            for n in [len(p.read_text().splitlines())] if n > MAX_FILE_LINES]
    assert not long, long


def test_no_nested_closure_shares_a_one_element_list():
    shared = [f"{p.relative_to(ROOT)}: {s}" for p in _files() for f in _functions(ast.parse(p.read_text()))
              for s in _shared_cells(f)]
    assert not shared, shared


def test_the_check_sees_a_shared_cell():
    """The closure check finds what it is meant to find (a check that cannot fail is a defect)."""
    tree = ast.parse("def run():\n    done = [0]\n    def finished():\n        done[0] += 1\n    return finished\n")
    outer = _functions(tree)[0]
    assert _shared_cells(outer) == ["finished writes done[0] (line 4)"]
