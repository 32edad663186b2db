"""The edit corpus (issue 41): programs before and after edits, to prove a break's identity survives them.

Each program is a base version and edits of one of its files. A harmless edit changes no
behaviour (lines added above and inside functions, a comment, a function moved, ``ruff format``,
an unrelated function renamed, a real release's next version of the file, ``dynscope fix``'s own
diff): comparing its run with the base's must find no new break, recompile or error (``fix``'s
diff: breaks gone, nothing new). A harmful edit adds breaks: each must be found, at its line.

Stdlib only: the unit tests read captures recorded from these versions (tests/data/edits/record.sh
writes them with ``python tests/edit_corpus.py record OUT``), the integration test runs a few live.
Every version is written as the same file names in a directory of its own, as two checkouts.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "edits"
MARK = "edit corpus: added break"


@dataclass(frozen=True)
class Edit:
    name: str
    apply: Callable[[str], str]  # the edited file's text -> the edited text
    adds: int = 0  # breaks the edit adds (0: harmless), each on a line that holds MARK
    removes_only: bool = False  # fix's diff: breaks gone, nothing new


@dataclass(frozen=True)
class Program:
    name: str
    entry: str  # the script run, in the version's directory
    edited: str  # the file the edits change (may be the entry script)
    base: Path  # its base version
    files: dict[str, Path] = field(default_factory=dict)  # other files of the program, unchanged
    args: tuple[str, ...] = ()
    edits: tuple[Edit, ...] = ()
    real_model: bool = False

    def version(self, edit: Edit | None) -> dict[str, str]:
        """The files of one version: name -> text."""
        text = self.base.read_text()
        files = {name: path.read_text() for name, path in self.files.items()}
        files[self.edited] = edit.apply(text) if edit else text
        return files

    def write(self, edit: Edit | None, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in self.version(edit).items():
            (folder / name).write_text(text)


# -- edits: plain text transforms of any Python file -------------------------------------------

def _functions(text: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _first_statement(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt | None:
    """The first statement of the body after its docstring, when it starts a line of its own."""
    body = fn.body[1:] if (isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant)
                           and isinstance(fn.body[0].value.value, str)) else fn.body
    if not body or body[0].lineno == fn.lineno or body[0].col_offset == 0:
        return None
    return body[0]


def _insert_in_functions(text: str, line_for: Callable[[str], str], only: str | None = None) -> str:
    """A line before the first statement (after the docstring) of every function (or those named ``only``)."""
    lines = text.splitlines(keepends=True)
    inserts = []
    for fn in _functions(text):
        if only is not None and fn.name != only:
            continue
        first = _first_statement(fn)
        if first is not None:
            indent = lines[first.lineno - 1][:first.col_offset]
            inserts.append((first.lineno - 1, indent + line_for(indent) + "\n"))
    for index, line in sorted(inserts, reverse=True):
        lines.insert(index, line)
    return "".join(lines)


def blank_lines_at_top(text: str) -> str:
    return "\n\n" + text


def lines_above(text: str) -> str:
    """Three lines of code and comments above the first class or function."""
    tree = ast.parse(text)
    first = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
    start = min([first.lineno, *(d.lineno for d in first.decorator_list)]) - 1
    lines = text.splitlines(keepends=True)
    lines[start:start] = ["# settings added by an edit\n", "EDIT_CORPUS_LIMIT = 3\n", "\n", "\n"]
    return "".join(lines)


def comment_in_functions(text: str) -> str:
    return _insert_in_functions(text, lambda indent: "# a comment added inside the function")


def line_in_functions(text: str) -> str:
    return _insert_in_functions(text, lambda indent: "edit_corpus_unused = None")


def function_moved(text: str) -> str:
    """The last top-level function moved above the first top-level class or function."""
    tree = ast.parse(text)
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    last = [n for n in defs if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))][-1]
    lines = text.splitlines(keepends=True)

    def start(n: ast.stmt) -> int:
        return min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", []))]) - 1

    block = lines[start(last):last.end_lineno]
    del lines[start(last):last.end_lineno]
    at = start(defs[0])
    lines[at:at] = [*block, "\n", "\n"]
    return "".join(lines)


def renamed(old: str, new: str) -> Callable[[str], str]:
    def rename(text: str) -> str:
        return re.sub(rf"\b{old}\b", new, text)
    return rename


def ruff_format(text: str) -> str:
    """``ruff format`` in a style unlike the file's: lines of 60 and single quotes (calls split)."""
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff") or "ruff"
    done = subprocess.run([ruff, "format", "--line-length", "60", "--config", "format.quote-style='single'",
                           "--stdin-filename", "edited.py", "-"], input=text, capture_output=True, text=True, check=True)
    return done.stdout


def file_version(path: Path) -> Callable[[str], str]:
    """The file replaced by another real version of it (the next release's)."""
    return lambda text: path.read_text()


def patched(diff: Path) -> Callable[[str], str]:
    """A unified diff of one file applied (``dynscope fix --diff``'s output, as it writes it)."""
    def apply(text: str) -> str:
        lines = text.splitlines(keepends=True)
        hunks = re.split(r"(?m)^(?=@@ )", diff.read_text())[1:]
        offset = 0
        for hunk in hunks:
            header, *body = hunk.splitlines(keepends=True)
            start = int(re.match(r"@@ -(\d+)", header)[1]) - 1 + offset  # type: ignore[index]
            old = [line[1:] for line in body if line[:1] in (" ", "-")]
            new = [line[1:] for line in body if line[:1] in (" ", "+")]
            assert lines[start:start + len(old)] == old, f"{diff} does not apply"
            lines[start:start + len(old)] = new
            offset += len(new) - len(old)
        return "".join(lines)
    return apply


def print_added(function: str, count: int = 1) -> Edit:
    """A print (a graph break) as the first statement of every function named ``function``."""
    return Edit(f"print added in {function}", lambda text: _insert_in_functions(
        text, lambda indent: f'print("{MARK}")', only=function), adds=count)


HARMLESS = (
    Edit("two blank lines at the top", blank_lines_at_top),
    Edit("lines added above", lines_above),
    Edit("a comment inside every function", comment_in_functions),
    Edit("a line added inside every function", line_in_functions),
    Edit("a function moved", function_moved),
    Edit("ruff format", ruff_format),
)

EXAMPLES = ROOT / "examples"
PROGRAMS = (
    Program("graph_breaks", "graph_breaks.py", "graph_breaks.py", EXAMPLES / "graph_breaks.py",
            args=("--backend", "eager"),
            edits=(*HARMLESS, Edit("main renamed", renamed("main", "run_main")),
                   Edit("fix's diff applied", patched(DATA / "graph_breaks.fix.diff"), removes_only=True),
                   print_added("forward"),
                   Edit(".item() added", lambda t: t.replace("        return torch.relu(y) + x\n",
                                                             f"        y = y * float(y.sum().item())  # {MARK}\n"
                                                             "        return torch.relu(y) + x\n"), adds=1))),
    Program("recompiles", "recompiles.py", "recompiles.py", EXAMPLES / "recompiles.py",
            args=("--backend", "eager"),
            edits=(*HARMLESS, Edit("main renamed", renamed("main", "run_main")), print_added("scaled_softmax"))),
    Program("two_blocks", "two_blocks.py", "two_blocks.py", DATA / "two_blocks.py",
            edits=(*HARMLESS, Edit("helper renamed", renamed("unrelated_helper", "renamed_helper")),
                   print_added("forward", count=2))),
    Program("switch_transformers", "switch_driver.py", "modeling.py", DATA / "switch_transformers_v5_23.py",
            files={"switch_driver.py": DATA / "switch_driver.py"}, real_model=True,
            edits=(Edit("transformers 5.23 -> 5.24", file_version(DATA / "switch_transformers_v5_24.py")),
                   Edit("two blank lines at the top", blank_lines_at_top),
                   Edit("a comment inside every function", comment_in_functions),
                   Edit("a function moved", function_moved),
                   Edit("ruff format", ruff_format),
                   print_added("compute_bias"))),
    Program("wav2vec2", "wav2vec2_driver.py", "modeling.py", DATA / "wav2vec2_v5_24.py",
            files={"wav2vec2_driver.py": DATA / "wav2vec2_driver.py"}, real_model=True,
            edits=(Edit("lines added above", lines_above),
                   Edit("a line added inside every function", line_in_functions),
                   Edit("a function moved", function_moved),
                   Edit("ruff format", ruff_format),
                   Edit("an unrelated function renamed", renamed("_get_feature_vector_attention_mask",
                                                                  "_feature_vector_attention_mask")),
                   print_added("_mask_hidden_states"))),
)


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def capture_name(program: Program, edit: Edit | None) -> str:
    return f"{program.name}.{slug(edit.name) if edit else 'base'}.dynscope"


def record(out: Path, python: str = sys.executable) -> None:
    """Every version of every program, explained with backend eager (record.sh calls this)."""
    import tempfile

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for program in PROGRAMS:
            for edit in (None, *program.edits):
                folder = Path(tmp) / program.name / (slug(edit.name) if edit else "base")
                program.write(edit, folder)
                target = out / capture_name(program, edit)
                target.unlink(missing_ok=True)
                subprocess.run([python, "-m", "dynscope", "explain", "-q", "-o", str(target), program.entry,
                                *program.args], cwd=folder, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                _vacuum(target)
                print(target.name, flush=True)


# What compare never reads, left out of the recorded captures to keep them small (the README says
# so): torch's config dumps and stacks in each compile's metrics (40 KB a compile), and the events
# of views other than compare (profiler spans, bytecode, guard trees, tensor descriptions, FX graphs).
_METRICS_DUMPS = ("dynamo_config", "inductor_config", "functorch_config", "compiler_config", "stack_trace",
                  "exception_stack_trace", "graph_node_shapes")
_UNREAD_EVENTS = ("chromium_event", "dynscope:log:bytecode", "dynamo_cpp_guards_str", "describe_tensor",
                  "describe_source", "describe_storage", "dynscope:fx_graph", "create_symbol")


def _vacuum(path: Path) -> None:
    """Small and self-contained: what compare does not read out, the WAL folded in, free pages dropped."""
    import sqlite3

    db = sqlite3.connect(path)
    paths = ", ".join(f"'$.compilation_metrics.{key}'" for key in _METRICS_DUMPS)
    db.execute(f"UPDATE events SET metadata = json_remove(metadata, {paths}) WHERE name = 'compilation_metrics'")
    marks = ", ".join("?" for _ in _UNREAD_EVENTS)
    db.execute(f"DELETE FROM events WHERE name IN ({marks}) OR name LIKE 'artifact:%_BYTECODE'", _UNREAD_EVENTS)
    db.execute("DELETE FROM blobs WHERE hash NOT IN (SELECT payload FROM events WHERE payload IS NOT NULL)")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("VACUUM")
    db.close()


if __name__ == "__main__" and sys.argv[1:2] == ["record"]:
    record(Path(sys.argv[2]))
