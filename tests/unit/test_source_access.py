"""A capture names source files; it must not decide what dynscope reads (issues 15 and 20):
excerpts come only from the reader's tree (the directory dynscope runs in, or --source-root)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from hostile import small_capture

from dynscope.analysis.source import MAX_SOURCE_BYTES, SourceAccess


def access(cwd: Path | str, *command: str, roots: tuple[str, ...] = (), any_source: bool = False) -> SourceAccess:
    run = SimpleNamespace(cwd=str(cwd), program_command=list(command))
    return SourceAccess.for_run(run, source_roots=roots, any_source=any_source)


def tree(tmp_path: Path) -> tuple[Path, Path]:
    program, outside = tmp_path / "prog", tmp_path / "outside"
    (program / "pkg").mkdir(parents=True)
    outside.mkdir()
    (program / "pkg" / "model.py").write_text("x = 1\ny = 2\n")
    (outside / "secret.py").write_text("SECRET_TOKEN = 'abc'\n")
    (outside / "id_rsa").write_text("PRIVATE KEY\n")
    return program, outside


def test_files_under_the_directory_dynscope_runs_in_are_read(tmp_path, monkeypatch):
    program, _ = tree(tmp_path)
    monkeypatch.chdir(program)
    sources = access(program, "train.py")
    assert sources.withheld("pkg/model.py") is None
    assert sources.excerpt("pkg/model.py", 2).lines == ((1, "x = 1"), (2, "y = 2"))


def test_a_directory_the_capture_names_counts_for_nothing(tmp_path, monkeypatch):
    """The capture claims its run's cwd and its script are in `outside`; dynscope runs elsewhere."""
    program, outside = tree(tmp_path)
    monkeypatch.chdir(program)
    sources = access(outside, str(outside / "secret.py"))
    assert sources.excerpt("secret.py", 1) is None
    assert sources.withheld("secret.py") == (f"source withheld: secret.py is outside the source roots; "
                                             f"add --source-root {outside}")
    # The reader names the directory: then it is read.
    assert access(outside, "x.py", roots=(str(outside),)).excerpt("secret.py", 1).lines == ((1, "SECRET_TOKEN = 'abc'"),)


def test_files_outside_the_roots_or_not_python_are_withheld(tmp_path, monkeypatch):
    program, outside = tree(tmp_path)
    monkeypatch.chdir(program)
    sources = access(program, "train.py")
    assert "outside the source roots" in sources.withheld(str(outside / "secret.py"))
    assert sources.excerpt(str(outside / "secret.py"), 1) is None
    # Climbing out with .. is the same file, and so is a symlink planted inside the tree.
    assert sources.excerpt("../outside/secret.py", 1) is None
    os.symlink(outside / "secret.py", program / "pkg" / "link.py")
    assert sources.excerpt("pkg/link.py", 1) is None
    assert "not Python source (.py); --any-source reads it" in sources.withheld("../outside/id_rsa")
    os.symlink(outside / "id_rsa", program / "pkg" / "key.py")
    assert sources.excerpt("pkg/key.py", 1) is None
    # A NUL in a path is no file name (and no crash).
    assert "not a file name" in sources.withheld("pkg/model.py\x00.py")
    assert sources.excerpt("pkg/model.py\x00.py", 1) is None


def test_special_and_huge_files_are_not_read(tmp_path, monkeypatch):
    program, _ = tree(tmp_path)
    monkeypatch.chdir(program)
    os.mkfifo(program / "pipe.py")  # opening it for reading would block forever
    (program / "big.py").write_bytes(b"x = 1\n" * (MAX_SOURCE_BYTES // 6 + 1))
    sources = access(program, "train.py")
    assert sources.excerpt("pipe.py", 1) is None
    assert sources.excerpt("big.py", 1) is None
    assert sources.excerpt("/dev/zero", 1) is None  # not .py, and not a regular file either


def test_any_source_reads_what_the_user_asked_for(tmp_path, monkeypatch):
    program, outside = tree(tmp_path)
    monkeypatch.chdir(program)
    sources = access(program, "train.py", any_source=True)
    assert sources.excerpt(str(outside / "secret.py"), 1).lines == ((1, "SECRET_TOKEN = 'abc'"),)


def test_running_from_the_filesystem_root_opens_nothing(tmp_path, monkeypatch):
    _, outside = tree(tmp_path)
    monkeypatch.chdir("/")
    assert "outside the source roots" in access("/", "/x.py").withheld(str(outside / "secret.py"))
    assert access("/", "/x.py", roots=("/",)).withheld(str(outside / "secret.py")) is None  # named: allowed


def _capture_naming(tmp_path: Path, secret: Path) -> Path:
    """A capture that claims it ran in the secret's directory, its break's frame in the secret."""
    capture = small_capture(tmp_path / "c.dynscope", strings="f")
    with sqlite3.connect(capture) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'cwd'", (json.dumps(str(secret.parent)),))
        db.execute("UPDATE meta SET value = ? WHERE key = 'command'",
                   (json.dumps(["dynscope", "explain", str(secret)]),))
        (id_, meta), = db.execute("SELECT id, metadata FROM events WHERE name = 'dynscope:graph_break'")
        meta = json.loads(meta)
        meta["user_stack"] = [{"file": secret.name, "line": 1, "function": "f", "code": "x"}]
        db.execute("UPDATE events SET metadata = ? WHERE id = ?", (json.dumps(meta), id_))
    return capture


def _secret_elsewhere(tmp_path):
    """(home, reader, capture): a settings .py with a secret in ``home``, a capture claiming it,
    and the directory the reader runs in."""
    home, reader = tmp_path / "home", tmp_path / "reader"
    home.mkdir()
    reader.mkdir()
    secret = home / "settings.py"
    secret.write_text("SECRET_TOKEN = 'abc'\n")
    return home, reader, _capture_naming(tmp_path, secret)


def test_reports_never_embed_a_file_from_the_directory_a_capture_claims(tmp_path):
    """A capture claiming cwd=/some/dir, where a settings .py with secrets lives: neither the
    HTML nor the Markdown report gets it; they say how to allow it; --source-root allows it."""
    home, reader, capture = _secret_elsewhere(tmp_path)

    def report(fmt: str, *extra: str) -> str:
        out = reader / f"r.{fmt}"
        done = subprocess.run([sys.executable, "-m", "dynscope", "report", str(capture), "-o", str(out), *extra],
                              capture_output=True, cwd=reader)
        assert done.returncode == 0, done.stderr
        return out.read_text()

    html = report("html")
    assert "SECRET_TOKEN" not in html
    assert f"settings.py is outside the source roots; add --source-root {home}" in html
    assert "SECRET_TOKEN" not in report("md")
    assert "SECRET_TOKEN" in report("html", "--source-root", str(home))
    assert "SECRET_TOKEN" in report("html", "--any-source")


def test_the_tui_never_shows_a_file_from_the_directory_a_capture_claims(tmp_path, monkeypatch):
    import asyncio

    from textual.widgets import Static
    from tui_pilot import settle, text_of

    from dynscope.model import Capture
    from dynscope.tui.app import DynscopeApp
    from dynscope.tui.code_view import CodeView

    home, reader, capture = _secret_elsewhere(tmp_path)
    monkeypatch.chdir(reader)
    shown: dict[str, str] = {}

    async def main(**options) -> None:
        with Capture.open(str(capture)) as opened:
            app = DynscopeApp(opened, **options)
            async with app.run_test(size=(120, 40)) as pilot:
                await pilot.press("3")
                await settle(app, pilot)
                shown["break"] = app.query_one("#break-source", CodeView).text
                shown["info"] = " ".join(text_of(s) for s in app.screen.query(Static))
                await pilot.press("enter")  # the source screen at the break's frame
                await settle(app, pilot)
                shown["screen"] = " ".join(text_of(s) for s in app.screen.query(Static))
                shown["code"] = " ".join(v.text for v in app.screen.query(CodeView))

    asyncio.run(main())
    assert "SECRET_TOKEN" not in " ".join(shown.values())
    assert "outside the source roots; add --source-root" in " ".join(shown.values())
    asyncio.run(main(source_roots=(str(home),)))
    assert "SECRET_TOKEN" in shown["break"] and "SECRET_TOKEN" in shown["code"]


def test_a_source_root_that_is_not_a_directory_is_one_line(tmp_path):
    capture = small_capture(tmp_path / "c.dynscope")
    done = subprocess.run([sys.executable, "-m", "dynscope", "report", str(capture), "-o", str(tmp_path / "r.html"),
                           "--source-root", str(tmp_path / "nope")], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == f"dynscope: --source-root {tmp_path / 'nope'}: not a directory\n"


def test_this_pythons_own_libraries_are_read_but_only_their_python_files(tmp_path, monkeypatch):
    """Breaks inside torch or transformers show their line: the reader's own install, which no
    capture chose. The rules of a root still hold there (.py only)."""
    import json as some_library_module
    import sysconfig

    monkeypatch.chdir(tmp_path)
    sources = access(tmp_path / "elsewhere", "train.py")
    library_file = some_library_module.__file__
    assert sources.withheld(library_file) is None
    assert sources.excerpt(library_file, 1) is not None
    not_python = Path(sysconfig.get_paths()["stdlib"]) / "LICENSE.txt"
    if not_python.exists():
        assert "not Python source" in sources.withheld(str(not_python))
