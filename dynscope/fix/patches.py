"""Code changes as unified diffs the user can apply (``git apply``), made from the program's own
source. Only Python files under the program's directory are read; nothing is written."""

from __future__ import annotations

import difflib
import os
import re

from dynscope.fix.unified_diff import MAX_FILE_BYTES, read_regular


def disable_diff(path: str, function: str, line: int | None, root: str) -> str | None:
    """``@torch.compiler.disable`` above ``def function`` (the def at or above ``line``)."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    if not real.endswith(".py") or os.path.commonpath([real, base]) != base:
        return None
    try:  # a FIFO named like the file (a capture's tree is a stranger's) is refused before it is opened
        lines = read_regular(real, MAX_FILE_BYTES).decode("utf-8").splitlines(keepends=True)
    except (OSError, UnicodeDecodeError):
        return None
    pattern = re.compile(rf"^(\s*)(?:async\s+)?def\s+{re.escape(function)}\s*\(")
    start = min(len(lines), line or len(lines)) - 1
    for i in range(start, -1, -1):
        match = pattern.match(lines[i])
        if match:
            break
    else:
        return None
    changed = lines[:i] + [f"{match[1]}@torch.compiler.disable\n"] + lines[i:]
    if not any(re.match(r"\s*(import torch\b|from torch\b)", text) for text in lines):
        changed = ["import torch\n"] + changed
    name = os.path.relpath(real, base)
    return "".join(difflib.unified_diff(lines, changed, f"a/{name}", f"b/{name}"))
