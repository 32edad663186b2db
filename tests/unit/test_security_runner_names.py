"""Capture file names for tests (pytest --dynscope-dir) and child processes: readable,
collision-free, and always a plain file name inside the chosen directory."""

from __future__ import annotations

import os

import pytest

from dynscope.pytest_plugin import capture_file_name

NODE_IDS = [
    "pkg/test_a.py::test[a b]",
    "pkg/test_a.py::test[a_b]",
    "pkg/test_a.py::test[a/b]",
    "pkg/test_a.py::test[A b]",
    "pkg/test_a.py::test[a\u00e9b]",
    "pkg/test_a.py::test[a\x1b]2;title\x07b]",
    "pkg/test_a.py::test[../../etc/passwd]",
    "..",
    "",
    "pkg/test_a.py::test[" + "x" * 5000 + "]",
    "pkg/test_a.py::test[" + "x" * 5000 + "y]",
]


def test_node_ids_that_sanitize_alike_get_different_files():
    names = [capture_file_name(n) for n in NODE_IDS]
    assert len(set(names)) == len(NODE_IDS)
    assert len({n.lower() for n in names}) == len(NODE_IDS)  # case-insensitive file systems too


def test_the_name_stays_readable_and_stable():
    name = capture_file_name("pkg/test_a.py::test_clean")
    assert name.startswith("pkg_test_a.py_test_clean-") and name.endswith(".dynscope")
    assert name == capture_file_name("pkg/test_a.py::test_clean")


@pytest.mark.parametrize("node_id", NODE_IDS)
def test_every_name_is_one_plain_file_in_the_directory(node_id, tmp_path):
    name = capture_file_name(node_id)
    assert os.sep not in name and "\x00" not in name
    assert not name.startswith(".")  # neither hidden nor "." / ".."
    assert all(c.isascii() and (c.isalnum() or c in "_.-") for c in name)
    assert len(name.encode()) <= 200
    path = tmp_path / name
    path.write_text("")
    assert path.parent == tmp_path
