"""The layering of the design (README "How it works"), checked rather than written down (no torch needed).

Imports are read with ``ast`` from the four source folders, installed as one namespace
(dynscope/, tui/ -> dynscope.tui, reporters/ -> dynscope.reporters, minifier/ ->
dynscope.minifier). Every import counts, lazy ones inside functions and TYPE_CHECKING ones
included: a lazy import is still a dependency. A second group of tests runs the reading
commands in a fresh interpreter and looks at ``sys.modules``.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from hostile import small_capture

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"dynscope": "dynscope", "dynscope.tui": "tui", "dynscope.reporters": "reporters",
           "dynscope.minifier": "minifier"}
VIEWS = ("dynscope.tui", "dynscope.reporters", "dynscope.minifier")
HEAVY = ("torch", "textual", "jinja2")
# Front ends: they start recordings or tools and show their results with the views (the command
# line; the notebook magics; the MCP server for agents).
FRONT_ENDS = ("dynscope.commands", "dynscope.notebook", "dynscope.agents")


@dataclass(frozen=True)
class Rule:
    name: str
    sources: tuple[str, ...]  # modules (and their submodules) the rule applies to
    forbidden: tuple[str, ...]  # modules (and their submodules) they must not import
    exempt: tuple[str, ...] = ()  # sources the rule does not apply to


def _views_but(view: str) -> Rule:
    return Rule(f"the view {view} imports no other view", (view,), tuple(v for v in VIEWS if v != view))


RULES = (
    Rule("the event contract is standalone (stdlib only)", ("dynscope.events",), ("dynscope", *HEAVY)),
    Rule("the store imports no model", ("dynscope.store",),
         ("dynscope.model", "dynscope.analysis", "dynscope.probes", "dynscope.recorder", "dynscope.commands", *VIEWS)),
    Rule("the model imports no analysis and no view", ("dynscope.model",),
         ("dynscope.analysis", "dynscope.probes", "dynscope.recorder", "dynscope.runner", "dynscope.commands",
          *VIEWS)),
    Rule("the core imports no view", ("dynscope",), VIEWS, exempt=(*FRONT_ENDS, *VIEWS)),
    *(_views_but(v) for v in VIEWS),
    Rule("nothing below dynscope.commands imports it", ("dynscope",), ("dynscope.commands",),
         exempt=(*FRONT_ENDS, "dynscope.__main__")),
    # The runner starts the tools' children but knows none of them: a child extension is named in
    # the ChildSpec and imported by that name (dynscope/runner/extensions.py), never statically.
    Rule("the runner imports no tool and no analysis", ("dynscope.runner",),
         ("dynscope.fix", "dynscope.minifier", "dynscope.analysis", "dynscope.commands", *VIEWS)),
    # The runner and the recorder write captures and start children; they stand below what reads
    # captures (the model, the analyses) and what hosts them (the notebook, the agents' server,
    # the commands, dynscope.capture()'s BlockCapture, the views).
    Rule("the runner and the recorder know no model and no host", ("dynscope.runner", "dynscope.recorder"),
         ("dynscope.model", "dynscope.analysis", "dynscope.notebook", "dynscope.agents", "dynscope.commands",
          "dynscope.block_capture", *VIEWS)),
    # The tools side by side: each reads the view and runs children through the runner.
    Rule("fix imports no other tool and no view", ("dynscope.fix",),
         ("dynscope.minifier", "dynscope.commands", "dynscope.tui", "dynscope.reporters")),
    Rule("the minifier imports no other tool", ("dynscope.minifier",), ("dynscope.fix",)),
    # Importing torch's logs is a writer of its own: the contract and the store, nothing that reads.
    Rule("import writes the contract into the store and reads nothing", ("dynscope.trace_import",),
         ("dynscope.model", "dynscope.analysis", "dynscope.probes", "dynscope.recorder", "dynscope.runner",
          "dynscope.fix", "dynscope.commands", *VIEWS, "torch")),
    # The pytest plugin is a part of its own (a pytest11 entry point): nothing of dynscope imports it.
    Rule("nothing imports the pytest plugin", ("dynscope",), ("dynscope.pytest_plugin",),
         exempt=("dynscope.pytest_plugin",)),
    # The rewrite catalogue is text to text: fix and the unit layer import it without torch.
    Rule("the source rewrites read text and import no torch and no tool", ("dynscope.rewrites",),
         ("torch", "dynscope.probes", "dynscope.recorder", "dynscope.runner", "dynscope.fix", "dynscope.model",
          "dynscope.analysis", "dynscope.commands", *VIEWS)),
    Rule("reading a capture never imports torch", ("dynscope.store", "dynscope.model", "dynscope.analysis",
                                                    "dynscope.events", "dynscope.trace_events", "dynscope.tui",
                                                    "dynscope.reporters"),
         ("torch", "dynscope.probes", "dynscope.recorder", "dynscope.runner")),
)


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def module_files(root: Path) -> dict[str, Path]:
    """Every module of the namespace, by its dotted name."""
    found: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = [p for p in path.relative_to(root / folder).with_suffix("").parts if p != "__init__"]
            if package == "dynscope" and parts and parts[0] in ("tui", "reporters", "minifier"):
                continue
            found[".".join([package, *parts])] = path
    return found


def imports_of(module: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the file; ``from pkg import sub`` names the submodule."""
    is_package = path.name == "__init__.py"
    out: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((sub if sub in known else target, node.lineno))
    return out


def import_graph(root: Path) -> dict[str, list[tuple[str, int]]]:
    files = module_files(root)
    return {m: imports_of(m, p, set(files)) for m, p in files.items()}


@functools.lru_cache(maxsize=1)
def repository_graph() -> dict[str, list[tuple[str, int]]]:
    return import_graph(ROOT)


def violations(graph: dict[str, list[tuple[str, int]]]) -> list[str]:
    found = []
    for rule in RULES:
        for module, imports in graph.items():
            if not _within(module, rule.sources) or _within(module, rule.exempt):
                continue
            for target, line in imports:
                if _within(target, rule.forbidden) and not _within(target, (module,)):
                    found.append(f"{rule.name}: {module} imports {target} (line {line})")
    return found


def cycles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Import circles between modules (Tarjan's strongly connected components)."""
    edges = {m: sorted({t for t, _ in imps if t in graph and t != m}) for m, imps in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_the_layers_hold():
    graph = repository_graph()
    assert len(graph) > 100  # the walk found the whole namespace, views included
    assert "dynscope.tui.text" in graph and "dynscope.reporters.html" in graph
    assert violations(graph) == []


def torch_internals(graph: dict[str, list[tuple[str, int]]]) -> list[str]:
    """Imports of torch's private modules (``torch._*``) outside dynscope/probes/compat.py, the one
    module that feature-detects them for every supported torch."""
    return [f"{module} imports {target} (line {line})" for module, imports in graph.items()
            if module != "dynscope.probes.compat" for target, line in imports
            if target.startswith("torch._")]


def test_only_compat_imports_torch_internals(tmp_path):
    assert torch_internals(repository_graph()) == []
    for folder in FOLDERS.values():
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    plugin = tmp_path / "dynscope" / "pytest_plugin.py"
    plugin.write_text(plugin.read_text() + "\n\ndef _reset():\n    import torch._dynamo\n")
    assert torch_internals(import_graph(tmp_path)) == ["dynscope.pytest_plugin imports torch._dynamo (line "
                                                       f"{len(plugin.read_text().splitlines())})"]


def test_a_forbidden_import_is_caught(tmp_path):
    """The contract fails when someone adds a forbidden import: here, a view reaching into the
    commands (what tui/text.py once did) and the model importing a view."""
    for folder in FOLDERS.values():
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    assert violations(import_graph(tmp_path)) == []
    text = tmp_path / "tui" / "text.py"
    text.write_text(text.read_text() + "\nfrom dynscope.commands._common import add_capture_argument\n")
    records = tmp_path / "dynscope" / "model" / "records.py"
    records.write_text(records.read_text() + "\n\ndef _late():\n    from ..reporters import terminal\n")
    child = tmp_path / "dynscope" / "runner" / "child.py"  # the upward arrow an environment flag once made
    child.write_text(child.read_text() + "\n\ndef _trial():\n    from dynscope.fix.apply import start_in_child\n")
    twin = tmp_path / "dynscope" / "runner" / "eager_twin.py"  # what eager_twin.py once imported
    twin.write_text(twin.read_text() + "\nfrom dynscope.model.runtime import last_snapshot\n")
    recorder = tmp_path / "dynscope" / "recorder.py"  # what Recorder.load() once imported
    recorder.write_text(recorder.read_text() + "\n\ndef _load():\n    from dynscope.notebook.display import CaptureView\n")
    found = violations(import_graph(tmp_path))
    assert any(v.startswith("the runner and the recorder know no model and no host: dynscope.runner.eager_twin "
                            "imports dynscope.model.runtime") for v in found), found
    assert any(v.startswith("the runner and the recorder know no model and no host: dynscope.recorder "
                            "imports dynscope.notebook.display") for v in found), found
    assert any(v.startswith("nothing below dynscope.commands imports it: dynscope.tui.text imports "
                            "dynscope.commands._common") for v in found), found
    assert any(v.startswith("the model imports no analysis and no view: dynscope.model.records imports "
                            "dynscope.reporters") for v in found), found
    assert any(v.startswith("the runner imports no tool and no analysis: dynscope.runner.child imports "
                            "dynscope.fix.apply") for v in found), found


def test_no_import_circles_in_the_core():
    """The model, store and analyses import each other one way only (model/capture.py and
    model/minify.py once imported each other)."""
    core = ("dynscope.model", "dynscope.store", "dynscope.analysis", "dynscope.events")
    graph = repository_graph()
    circles = [c for c in cycles(graph) if any(_within(m, core) for m in c)]
    assert circles == []


def test_no_import_circles_in_the_runner():
    """The recorder starts the runner's spawned children and the runner's child starts a recorder:
    one way each (recorder.py and runner/spawned.py once imported each other)."""
    below = ("dynscope.runner", "dynscope.recorder")
    circles = [c for c in cycles(repository_graph()) if any(_within(m, below) for m in c)]
    assert circles == []


def test_a_circle_is_caught():
    graph = {"a": [("b", 1)], "b": [("c", 1)], "c": [("a", 3)], "d": [("a", 1)]}
    assert cycles(graph) == [["a", "b", "c"]]


# -- reading a capture imports neither torch nor the other views ---------------------------

_PROBE = r"""
import contextlib, io, json, sys
from dynscope.commands import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(json.loads(sys.argv[1]))
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "textual", "jinja2", "rich")
                or m.startswith(("dynscope.tui", "dynscope.reporters", "dynscope.minifier", "dynscope.probes")))
print(json.dumps({"code": code, "loaded": loaded}))
"""

# command -> the view modules it may load (everything else among the views, the probes and
# the heavy packages must stay out of sys.modules); the last one must be loaded. rich only for
# output to a terminal: JSON, Markdown and HTML start without it (about 75 ms of CPU).
READERS = {
    "summary": (["summary", "{capture}"], ("rich", "dynscope.reporters", "dynscope.reporters.terminal")),
    "summary --json": (["summary", "{capture}", "--json"], ()),
    "report html": (["report", "{capture}", "-o", "{tmp}/r.html"],
                    ("dynscope.reporters", "dynscope.reporters.html", "jinja2")),
    "report md": (["report", "{capture}", "--format", "md"], ("dynscope.reporters", "dynscope.reporters.markdown")),
    "report json": (["report", "{capture}", "--format", "json"],
                    ("dynscope.reporters", "dynscope.reporters.json_report")),
    "stages": (["stages", "{capture}", "--compile", "0/0"], ("rich",)),
    "show": (["show", "{capture}", "--compile", "0/0", "--stage", "dynamo"], ()),  # piped: plain text
    # Without a terminal the app is built (the overview's records read), then refused.
    "tui": (["tui", "{capture}"], ("rich", "dynscope.tui", "textual")),
}


def test_reading_a_capture_imports_neither_torch_nor_other_views(tmp_path):
    capture = small_capture(tmp_path / "run.dynscope")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "unit")}
    runs = {}
    for label, (argv, _) in READERS.items():
        argv = [a.format(capture=capture, tmp=tmp_path) for a in argv]
        runs[label] = subprocess.Popen([sys.executable, "-c", _PROBE, json.dumps(argv)], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    for label, proc in runs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (label, err)
        result = json.loads(out.strip().splitlines()[-1])
        allowed = READERS[label][1]
        if label == "tui":  # the TUI refuses a pipe, after building its app
            assert result["code"] == 2 and "needs an interactive terminal" in err, err
        else:
            assert result["code"] == 0, (label, err)
        unexpected = [m for m in result["loaded"] if not _within(m, allowed)]
        assert unexpected == [], f"`dynscope {label}` imported {unexpected}"
        if allowed:  # the check sees imports: the view this command needs is there
            assert any(_within(m, allowed[-1:]) for m in result["loaded"]), (label, result)


# -- the unit layer itself runs without torch -------------------------------------------

_IMPORT_UNIT_TESTS = r"""
import importlib, json, sys
from pathlib import Path
unit = Path(sys.argv[1])
sys.path[:0] = [str(unit), str(unit.parent)]  # as pytest puts them (rootdir-relative, no __init__.py)
for path in sorted(unit.glob("*.py")):
    importlib.import_module(path.stem)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "torch")))
"""


def test_no_unit_test_module_imports_torch():
    """Collecting tests/unit loads no torch (the autouse check in tests/unit/conftest.py covers running them)."""
    result = subprocess.run([sys.executable, "-c", _IMPORT_UNIT_TESTS, str(ROOT / "tests" / "unit")],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_the_test_only_kernel_build_knob_is_read_in_compat_alone_and_set_by_the_tests_alone():
    """DYNSCOPE_TEST_KEEP_KERNEL_BUILDS (CONTRIBUTING.md, "Test-only settings") changes what a
    recorded run does: only compat.py may read it and only tests/conftest.py may set it, so no
    command, option or default can ever hand it to a user."""
    name = "DYNSCOPE_TEST_KEEP_KERNEL_BUILDS"
    sources = [p for folder in FOLDERS.values() for p in sorted((ROOT / folder).rglob("*.py"))]
    naming = sorted(str(p.relative_to(ROOT)) for p in sources if name in p.read_text(encoding="utf-8"))
    assert naming == ["dynscope/probes/compat.py"]
    setting = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py")
                     if name in p.read_text(encoding="utf-8") and p.name != "test_layering.py")
    assert setting == ["tests/conftest.py"]
