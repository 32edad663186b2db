"""A capture names source files; it must not decide what dynscope reads (issue 15)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from hostile import small_capture

from dynscope.analysis.source import SourceAccess


def access(cwd: Path | str, *command: str, any_source: bool = False) -> SourceAccess:
    run = SimpleNamespace(cwd=str(cwd), program_command=list(command))
    return SourceAccess.for_run(run, any_source=any_source)


def tree(tmp_path: Path) -> tuple[Path, Path]:
    program, outside = tmp_path / "prog", tmp_path / "outside"
    (program / "pkg").mkdir(parents=True)
    outside.mkdir()
    (program / "pkg" / "model.py").write_text("x = 1\ny = 2\n")
    (outside / "secret.py").write_text("SECRET_TOKEN = 'abc'\n")
    (outside / "id_rsa").write_text("PRIVATE KEY\n")
    return program, outside


def test_files_in_the_program_tree_are_read(tmp_path):
    program, _ = tree(tmp_path)
    sources = access(program, "train.py")
    assert sources.withheld("pkg/model.py") is None
    assert sources.excerpt("pkg/model.py", 2).lines == ((1, "x = 1"), (2, "y = 2"))


def test_files_outside_the_tree_or_not_python_are_withheld(tmp_path):
    program, outside = tree(tmp_path)
    sources = access(program, "train.py")
    assert "outside the program's directory" in sources.withheld(str(outside / "secret.py"))
    assert sources.excerpt(str(outside / "secret.py"), 1) is None
    # Climbing out with .. is the same file, and so is a symlink planted inside the tree.
    assert sources.excerpt("../outside/secret.py", 1) is None
    os.symlink(outside / "secret.py", program / "pkg" / "link.py")
    assert sources.excerpt("pkg/link.py", 1) is None
    assert "not Python source" in sources.withheld("../outside/id_rsa")
    os.symlink(outside / "id_rsa", program / "pkg" / "key.py")
    assert sources.excerpt("pkg/key.py", 1) is None


def test_any_source_reads_what_the_user_asked_for(tmp_path):
    program, outside = tree(tmp_path)
    sources = access(program, "train.py", any_source=True)
    assert sources.excerpt(str(outside / "secret.py"), 1).lines == ((1, "SECRET_TOKEN = 'abc'"),)


def test_the_script_directory_and_this_pythons_libraries_are_part_of_the_tree(tmp_path):
    program, outside = tree(tmp_path)
    sources = access(program, str(outside / "secret.py"))  # the script lives elsewhere
    assert sources.excerpt(str(outside / "secret.py"), 1) is not None
    assert sources.withheld(os.__file__) is None  # the standard library, as installed here


def test_a_capture_claiming_the_filesystem_root_gets_no_tree(tmp_path):
    _, outside = tree(tmp_path)
    assert "outside the program's directory" in access("/", "/x.py").withheld(str(outside / "secret.py"))


def test_reports_say_why_source_is_withheld_and_show_it_on_request(tmp_path):
    program, outside = tree(tmp_path)
    capture = small_capture(program / "c.dynscope", strings="f")
    with sqlite3.connect(capture) as db:
        (id_, meta), = db.execute("SELECT id, metadata FROM events WHERE name = 'dynscope:graph_break'")
        meta = json.loads(meta)
        meta["user_stack"] = [{"file": str(outside / "secret.py"), "line": 1, "function": "f", "code": "x"}]
        db.execute("UPDATE events SET metadata = ? WHERE id = ?", (json.dumps(meta), id_))

    def report(*extra: str) -> str:
        out = tmp_path / "r.html"
        subprocess.run([sys.executable, "-m", "dynscope", "report", str(capture), "-o", str(out), *extra],
                       check=True, capture_output=True)
        return out.read_text()

    html = report()
    assert "SECRET_TOKEN" not in html
    assert "outside the program&#39;s directory" in html
    assert "SECRET_TOKEN" in report("--any-source")
