"""`dynscope mcp`'s door, attacked (docs/security.md, "The MCP server"), without torch.

Every file a client names is opened once, by descriptor, walking from the root's descriptor with
O_NOFOLLOW; a link out of the root is refused, one that stays inside is followed by the walk; a link
swapped in between the check and SQLite's own open is caught; the warm capture's cold run comes
through the same door; every refusal is one line with its reason; a tree 1,100 directories deep,
a NUL in a program's arguments and a dangling `.dynscope-mcp` link are answered with reasons.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from hostile_views import RECORDED

from dynscope.agents.served import MAX_LINKS, MAX_LISTED_DEPTH, OutsideServedDirectory, ServedDirectory
from dynscope.agents.server import _answer
from dynscope.agents.tools import Tools
from dynscope.errors import CaptureError, DynscopeError
from dynscope.store.reader import CaptureReader

CACHES = Path(__file__).resolve().parents[1] / "data" / "caches" / "2.13.0+cpu"


@pytest.fixture
def tree(tmp_path) -> tuple[Path, Path]:
    """The served root, and a directory beside it (outside) holding a capture the attacker wants read."""
    root, outside = tmp_path / "served", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    shutil.copy(RECORDED / "graph_breaks_eager.dynscope", root / "inside.dynscope")
    shutil.copy(RECORDED / "recompiles_eager.dynscope", outside / "secret.dynscope")
    return root, outside


def _refusal(produce) -> str:
    """The one line a client gets for a refused call (what server._answer turns into a tool error)."""
    with pytest.raises(DynscopeError) as raised:
        produce()
    text = str(raised.value)
    assert "\n" not in text and "Traceback" not in text and text.strip()
    return text


# -- paths ------------------------------------------------------------------------------------------


def test_links_inside_the_root_are_followed_by_the_walk_and_links_out_are_refused(tree):
    root, outside = tree
    (root / "runs").mkdir()
    os.symlink("../inside.dynscope", root / "runs" / "latest.dynscope")  # inside: fine
    os.symlink(str(root / "inside.dynscope"), root / "absolute-inside.dynscope")  # absolute, inside: fine
    os.symlink(str(outside / "secret.dynscope"), root / "out.dynscope")
    os.symlink("../outside", root / "up")
    os.symlink("runs/../../outside/secret.dynscope", root / "dotdot.dynscope")
    os.symlink("loop-b", root / "loop-a")
    os.symlink("loop-a", root / "loop-b")
    served = ServedDirectory.at(str(root))
    tools = Tools(served)
    for name in ("runs/latest.dynscope", "absolute-inside.dynscope", str(root / "inside.dynscope"),
                 "runs/../inside.dynscope", "./runs/./latest.dynscope"):
        assert tools.summary(name)["totals"]["graph_breaks"] == 4, name
    for escape in ("out.dynscope", "up/secret.dynscope", "dotdot.dynscope", "../outside/secret.dynscope",
                   str(outside / "secret.dynscope"), "runs/../../outside/secret.dynscope", "/etc/passwd",
                   "/" + "/".join([".."] * 40) + str(outside / "secret.dynscope")):
        line = _refusal(lambda name=escape: tools.summary(name))
        assert "outside the directory this server serves" in line, (escape, line)
    assert f"more than {MAX_LINKS} symbolic links" in _refusal(lambda: tools.summary("loop-a"))


def test_what_is_not_a_regular_file_is_refused_by_name_before_any_open(tree):
    root, _ = tree
    os.mkfifo(root / "pipe.dynscope")
    (root / "dir.dynscope").mkdir()
    (root / "text.dynscope").write_text("not a capture")
    os.symlink("/dev/zero", root / "zero.dynscope")
    tools = Tools(ServedDirectory.at(str(root)))
    assert "is a FIFO, not a regular file" in _refusal(lambda: tools.summary("pipe.dynscope"))
    assert "is a directory, not a regular file" in _refusal(lambda: tools.summary("dir.dynscope"))
    assert "is not a dynscope capture" in _refusal(lambda: tools.summary("text.dynscope"))
    assert "outside the directory" in _refusal(lambda: tools.summary("zero.dynscope"))
    assert "no such capture: gone.dynscope" in _refusal(lambda: tools.summary("gone.dynscope"))
    assert "(inside.dynscope is not a directory)" in _refusal(lambda: tools.summary("inside.dynscope/x"))
    for bad in ("", "a\0b", "x" * 5000):
        assert _refusal(lambda b=bad: tools.summary(b))


def test_a_link_swapped_in_while_the_server_opens_a_capture_is_never_read(tree):
    """The race of N4: a thread swaps the name between a capture inside and a link to one outside
    while the server answers 300 calls. Each call reads the inside capture or is refused with its
    reason; none reads the outside one (the old door read it in 13 of 300)."""
    root, outside = tree
    served = ServedDirectory.at(str(root))
    tools = Tools(served)
    os.link(root / "inside.dynscope", root / "real.dynscope")
    os.symlink(str(outside / "secret.dynscope"), root / "evil-link")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.link(root / "real.dynscope", root / "tmp-file")
            os.replace(root / "tmp-file", root / "swapped.dynscope")
            os.symlink(str(outside / "secret.dynscope"), root / "tmp-link")
            os.replace(root / "tmp-link", root / "swapped.dynscope")

    thread = threading.Thread(target=swap)
    thread.start()
    read, refused = 0, []
    try:
        for _ in range(300):
            try:
                document = tools.summary("swapped.dynscope")
            except DynscopeError as e:
                refused.append(str(e))
                continue
            assert document["totals"]["recompiles"] == 0 and document["totals"]["graph_breaks"] == 4
            read += 1
    finally:
        stop.set()
        thread.join()
    assert read + len(refused) == 300
    assert all("\n" not in r and ("outside the directory" in r or "changed while it was opened" in r
                                  or "no such capture" in r) for r in refused), set(refused)


def test_sqlites_own_open_must_land_on_the_file_the_door_opened(tree):
    """The check after SQLite's open by name: given the descriptor of one file and the name of
    another (what a swap between the door and SQLite does), nothing is read."""
    root, outside = tree
    fd = os.open(root / "inside.dynscope", os.O_RDONLY)
    try:
        with CaptureReader(str(root / "inside.dynscope"), pinned=fd) as reader:
            assert reader.meta
        with pytest.raises(CaptureError, match="changed while it was opened"):
            CaptureReader(str(outside / "secret.dynscope"), pinned=fd)
    finally:
        os.close(fd)


def test_a_warm_captures_cold_run_comes_through_the_same_door(tmp_path):
    root, outside = tmp_path / "served", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    shutil.copy(CACHES / "warm.dynscope", root / "warm.dynscope")
    shutil.copy(CACHES / "warm.cold.dynscope", outside / "warm.cold.dynscope")
    tools = Tools(ServedDirectory.at(str(root)))
    os.symlink(str(outside / "warm.cold.dynscope"), root / "warm.cold.dynscope")  # a link out: not opened
    warm = tools.summary("warm.dynscope")["caches"]["warm"]
    assert warm["cold_found"] is False and "leads through a symbolic link to outside" in warm["cold_why"]
    os.remove(root / "warm.cold.dynscope")
    (root / "kept").mkdir()
    shutil.copy(CACHES / "warm.cold.dynscope", root / "kept" / "cold.dynscope")
    os.symlink("kept/cold.dynscope", root / "warm.cold.dynscope")  # a link inside: followed by the walk
    warm = tools.summary("warm.dynscope")["caches"]["warm"]
    assert warm["cold_found"] is True and warm["cold_why"] is None


# -- N10: errors with their reasons ----------------------------------------------------------------


def test_a_tree_1100_directories_deep_is_listed_with_what_was_skipped(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    shutil.copy(RECORDED / "graph_breaks_eager.dynscope", root / "top.dynscope")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(1100):  # by descriptor: the path would be longer than the system takes
            os.mkdir("d", dir_fd=fd)
            deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
        shutil.copyfileobj(open(RECORDED / "recompiles_eager.dynscope", "rb"),
                           os.fdopen(os.open("deep.dynscope", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb"))
    finally:
        os.close(fd)
    try:
        document = json.loads(_answer(Tools(ServedDirectory.at(str(root))).list_captures))
    finally:
        _cut_in_two(root, 600)  # shutil.rmtree (pytest's clean-up too) recurses once per level
        shutil.rmtree(root)
    assert document["captures"] == ["top.dynscope"] and document["truncated"] is False
    assert document["skipped"].startswith(f"1 directories deeper than {MAX_LISTED_DEPTH} levels were not looked into")


def _cut_in_two(root: Path, depth: int) -> None:
    """Move the tree below ``depth`` levels of root/d/d/... up to root/lower."""
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    fd = os.dup(top)
    try:
        for _ in range(depth):
            deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
        os.rename("d", "lower", src_dir_fd=fd, dst_dir_fd=top)
    finally:
        os.close(fd)
        os.close(top)


def test_a_nul_in_a_programs_arguments_and_a_dangling_output_link_are_refused_with_reasons(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    (root / "prog.py").write_text("print(1)\n")
    tools = Tools(ServedDirectory.at(str(root)), allow_run=True)
    assert "args[1] holds a NUL character" in _refusal(lambda: tools.explain("prog.py", ["ok", "a\0b"]))
    assert "at most 1,000 arguments" in _refusal(lambda: tools.explain("prog.py", ["x"] * 1001))
    assert "a list of strings" in _refusal(lambda: tools.explain("prog.py", [1]))  # type: ignore[list-item]
    os.symlink(str(tmp_path / "nowhere"), root / ".dynscope-mcp")  # dangling
    line = _refusal(lambda: tools.explain("prog.py"))
    assert ".dynscope-mcp is a link or not a directory" in line
    assert not (tmp_path / "nowhere").exists()
    os.remove(root / ".dynscope-mcp")
    (root / ".dynscope-mcp").write_text("a file")
    assert "is a link or not a directory" in _refusal(lambda: tools.explain("prog.py"))


def test_words_given_to_a_child_cannot_become_its_options(tree):
    root, _ = tree
    tools = Tools(ServedDirectory.at(str(root)), allow_run=True)
    for compile_id in ("--out=/tmp/elsewhere", "0/0 --accuracy", "-h", "0/0\n", ""):
        assert "is not a compile id" in _refusal(lambda c=compile_id: tools.minify("inside.dynscope", c))
    assert "is not a backend" in _refusal(lambda: tools.minify("inside.dynscope", "0/0", backend="--help"))
    assert not (root / ".dynscope-mcp").exists()  # refused before anything was made or run


def test_outside_paths_are_refused_before_anything_runs(tree):
    root, outside = tree
    (outside / "evil.py").write_text("open('ran', 'w')\n")
    os.symlink(str(outside / "evil.py"), root / "prog.py")
    tools = Tools(ServedDirectory.at(str(root)), allow_run=True)
    for attempt in (lambda: tools.explain("prog.py"), lambda: tools.fix("../outside/evil.py"),
                    lambda: tools.minify("../outside/secret.dynscope", "0/0")):
        with pytest.raises(OutsideServedDirectory):
            attempt()
    assert not (root / "ran").exists() and not (outside / "ran").exists()


def test_a_huge_directory_is_listed_within_the_bounds(tmp_path, monkeypatch):
    import dynscope.agents.served as served_module

    monkeypatch.setattr(served_module, "MAX_LISTED_ENTRIES", 50)
    root = tmp_path / "served"
    root.mkdir()
    for i in range(200):
        (root / f"f{i:03}").write_text("")
    listing = ServedDirectory.at(str(root)).captures()
    assert listing.truncated is True and listing.captures == []


@pytest.mark.skipif(os.getuid() != 0, reason="giving a directory to another user needs root")
def test_an_output_directory_of_another_user_is_refused(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    (root / "prog.py").write_text("print(1)\n")
    (root / ".dynscope-mcp").mkdir()
    os.chown(root / ".dynscope-mcp", 65534, 65534)
    line = _refusal(lambda: Tools(ServedDirectory.at(str(root)), allow_run=True).explain("prog.py"))
    assert "belongs to another user" in line and list((root / ".dynscope-mcp").iterdir()) == []


def test_each_run_writes_into_a_new_directory_only_this_user_can_enter(tmp_path):
    root = tmp_path / "served"
    (root / ".dynscope-mcp").mkdir(parents=True, mode=0o755)  # as a tarball may bring it
    tools = Tools(ServedDirectory.at(str(root)), allow_run=True)
    first, second = tools._output_path("explain"), tools._output_path("explain")
    assert first != second and os.path.dirname(first) == str(root / ".dynscope-mcp")
    for directory in (first, second, str(root / ".dynscope-mcp")):
        assert os.stat(directory).st_mode & 0o777 == 0o700
    assert os.listdir(first) == []
