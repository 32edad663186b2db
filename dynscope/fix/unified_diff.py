"""Read a unified diff (``git diff``, ``diff -u``) and apply it to text, for ``fix --patch``.

The patch is someone else's change (a colleague's, an agent's), judged before anyone applies
it: this module only computes the changed text of each file, which the trial child runs
through the shadow (dynscope.runner.shadow). It applies like ``git apply`` without fuzz: every
context and removed line must match exactly, a hunk may sit a few lines from where its header
says. A path is a file under the program's tree or, failing that, of an installed library named from
its package on (``transformers/models/x.py``, as ``fix --diff`` writes a library's changes). What it
cannot judge is refused in one line: a path outside the program's tree and the libraries, a new,
deleted, renamed or binary file, a file not valid UTF-8.

The patch is a stranger's text, so every step is bounded (docs/security.md, "Patches and rewrites:
bounds"): the patch and each file it changes are regular files of at most 16 MiB, opened without
blocking and checked on the descriptor (a FIFO or a device is refused before a byte is read); at most
``MAX_FILES`` files of ``MAX_TOTAL_BYTES`` together and ``MAX_HUNKS`` hunks; a hunk's line numbers of at most 18 digits; the search
for a hunk that moved compares at most ``MAX_SEARCH_LINES`` lines in all and stops at the caller's
deadline (fix's ``--budget``). Lines end at ``\n`` alone, as git splits them: a form feed or a lone
``\r`` inside a line is part of it.
"""

from __future__ import annotations

import bisect
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from dynscope.errors import DynscopeError
from dynscope.store.regular import NotRegular, read_regular

MAX_PATCH_BYTES = 16 * 1024 * 1024
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_FILES = 500  # files one patch changes
MAX_TOTAL_BYTES = 64 * 1024 * 1024  # of the files one patch changes, together (500 sparse 16 MiB files would be 8 GiB)
MAX_HUNKS = 5_000  # hunks in all: git's own diff of a large refactor runs to a few hundred
MAX_SEARCH_LINES = 20_000_000  # lines compared in all while looking for hunks that moved (about 2 s)

# 18 digits at most: a line number past 10**18 is no file's, and int() of a longer one is refused by Python itself
_HUNK = re.compile(r"^@@ -(\d{1,18})(?:,(\d{1,18}))? \+(\d{1,18})(?:,(\d{1,18}))? @@")
_UNSUPPORTED = ("rename from ", "rename to ", "copy from ", "copy to ", "deleted file mode", "new file mode",
                "old mode ", "new mode ", "GIT binary patch", "Binary files ")


class PatchError(DynscopeError):
    """A patch that cannot be applied as it is; the message names the patch, the file and the hunk."""


@dataclass(frozen=True)
class Hunk:
    old_start: int  # 1-based line of the first old line (0 for a hunk at the top of an empty range)
    old: tuple[str, ...]  # context and removed lines, without line ends
    new: tuple[str, ...]  # context and added lines, without line ends
    new_ends_without_newline: bool = False  # "\ No newline at end of file" after its last new line


@dataclass(frozen=True)
class FilePatch:
    path: str  # relative to the program's tree, with / separators
    hunks: tuple[Hunk, ...]


@dataclass(frozen=True)
class ChangedFile:
    path: str  # absolute
    relative: str  # as the patch names it
    old: str
    new: str


def _lines(text: str) -> list[str]:
    """The lines of ``text`` as git splits them (at ``\\n`` alone), without their ends (``\\r\\n`` too)."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def _lines_with_ends(text: str) -> list[str]:
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def parse(text: str, name: str = "the patch") -> list[FilePatch]:
    """The files and hunks of a unified diff; a PatchError for anything it cannot take."""
    lines = _lines(text)
    patches: list[FilePatch] = []
    hunk_count = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(_UNSUPPORTED):
            raise PatchError(f"{name}: line {i + 1}: {line.strip()!r} is not supported (only changes to existing text files)")
        if not (line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
            i += 1
            continue
        old_path, new_path = _header_path(line[4:]), _header_path(lines[i + 1][4:])
        if old_path == "/dev/null" or new_path == "/dev/null":
            raise PatchError(f"{name}: line {i + 1}: creating or deleting a file is not supported (only changes to existing files)")
        path = _relative(new_path, name, i + 2)
        i += 2
        hunks: list[Hunk] = []
        while i < len(lines) and lines[i].startswith("@@"):
            hunk_count += 1
            if hunk_count > MAX_HUNKS:
                raise PatchError(f"{name}: line {i + 1}: more than {MAX_HUNKS:,} hunks: not a change fix can judge "
                                 "(split it)")
            hunk, i = _hunk(lines, i, name)
            hunks.append(hunk)
        if not hunks:
            raise PatchError(f"{name}: line {i}: {path} has a header but no hunk")
        patches.append(FilePatch(path, tuple(hunks)))
        if len(patches) > MAX_FILES:
            raise PatchError(f"{name}: changes more than {MAX_FILES:,} files: not a change fix can judge (split it)")
    if not patches:
        raise PatchError(f"{name}: no file changes found (is it a unified diff, as `git diff` writes?)")
    paths = [p.path for p in patches]
    if len(set(paths)) != len(paths):
        raise PatchError(f"{name}: changes the same file in two places of the patch: merge them into one")
    return patches


def _header_path(field: str) -> str:
    path = field.split("\t", 1)[0].strip()
    if path.startswith('"'):
        raise PatchError(f"a quoted path in a patch header is not supported: {path[:200]!r}")
    return path


def _relative(path: str, name: str, line: int) -> str:
    if path.startswith(("a/", "b/")):
        path = path[2:]  # git's prefixes, as `git apply` (-p1) strips them
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts) or "\x00" in path:
        raise PatchError(f"{name}: line {line}: the path {path[:200]!r} is not a plain path inside the program's tree")
    return path


def _hunk(lines: list[str], i: int, name: str) -> tuple[Hunk, int]:
    match = _HUNK.match(lines[i])
    if match is None:
        if re.match(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", lines[i]):
            raise PatchError(f"{name}: line {i + 1}: a hunk header with a number of more than 18 digits: no file has "
                             "that many lines")
        raise PatchError(f"{name}: line {i + 1}: not a hunk header: {lines[i][:200]!r}")
    old_start = int(match.group(1))
    old_count = int(match.group(2) if match.group(2) is not None else 1)
    new_count = int(match.group(4) if match.group(4) is not None else 1)
    old: list[str] = []
    new: list[str] = []
    new_without_newline = False
    last_tag = ""
    i += 1
    while i < len(lines) and (len(old) < old_count or len(new) < new_count or lines[i].startswith("\\")):
        line = lines[i]
        tag, body = line[:1], line[1:]
        if line.startswith("\\"):  # "\ No newline at end of file": about the line before it
            new_without_newline = new_without_newline or last_tag in (" ", "+")
        elif tag == " " or line == "":  # an empty line: context whose single space an editor dropped
            old.append(body)
            new.append(body)
        elif tag == "-":
            old.append(body)
        elif tag == "+":
            new.append(body)
        else:
            raise PatchError(f"{name}: line {i + 1}: the hunk ends before its header's line counts ({old_count}, {new_count})")
        last_tag = tag or " "
        i += 1
    if len(old) != old_count or len(new) != new_count:
        raise PatchError(f"{name}: line {i}: the hunk's lines do not add up to its header's counts ({old_count}, {new_count})")
    return Hunk(old_start, tuple(old), tuple(new), new_without_newline), i


def apply(patches: list[FilePatch], root: str, name: str = "the patch",
          libraries: Sequence[str] = (), deadline: float | None = None) -> list[ChangedFile]:
    """The changed text of every file the patch names under ``root``; nothing is written.

    A path that is not a file under ``root`` but is one under a directory of ``libraries`` (site-packages:
    ``transformers/models/x.py``, as fix's own library diffs name it) is that installed file: the shadow
    serves a library's changed text as it serves the program's. Past ``deadline`` (time.time()), a
    PatchError."""
    real_root = os.path.realpath(root)
    originals: list[tuple[str, str]] = []  # every file read first: the bounds hold before any hunk is searched for
    total = 0
    for patch in patches:
        real = _resolve(patch.path, real_root, root, libraries, name)
        same = next((p.path for p, (r, _) in zip(patches, originals) if r == real), None)
        if same is not None:  # through a link: the shadow would serve one of the two changes, git neither
            raise PatchError(f"{name}: {same} and {patch.path} are one file (a link): change it in one place")
        try:
            data = read_regular(real, MAX_FILE_BYTES)
            total += len(data)
            if total > MAX_TOTAL_BYTES:
                raise PatchError(f"{name}: the files it changes add up to more than {MAX_TOTAL_BYTES >> 20} MiB: "
                                 "not a change fix can judge")
            originals.append((real, data.decode("utf-8")))
        except UnicodeDecodeError as e:
            raise PatchError(f"{name}: cannot read {patch.path}: not UTF-8 text (byte {e.start})") from None
        except NotRegular as e:
            raise PatchError(f"{name}: cannot read {patch.path}: {e}") from None
        except OSError as e:
            raise PatchError(f"{name}: cannot read {patch.path}: {e.strerror or e}") from None
    search = _Search(deadline, name)
    return [ChangedFile(real, patch.path, old, _apply_hunks(old, patch, name, search))
            for patch, (real, old) in zip(patches, originals)]


def _resolve(relative: str, real_root: str, root: str, libraries: Sequence[str], name: str) -> str:
    """The real path of a patched file: under the program's tree first, else under an installed library's
    directory; never a link that leads out of the directory it was found in."""
    for base in (real_root, *(os.path.realpath(d) for d in libraries)):
        real = os.path.realpath(os.path.join(base, *relative.split("/")))
        if os.path.commonpath([real, base]) != base:
            if base == real_root:
                raise PatchError(f"{name}: {relative} leads outside the program's tree ({root})")
            continue
        if os.path.isfile(real):
            return real
    where = f"{root} or an installed library" if libraries else root
    raise PatchError(f"{name}: {relative} does not exist under {where}")


class _Search:
    """What the search for hunks that moved may still spend: lines compared, and time."""

    def __init__(self, deadline: float | None, name: str) -> None:
        self.left, self.deadline, self.name = MAX_SEARCH_LINES, deadline, name

    def spend(self, lines: int) -> None:
        self.left -= lines
        if self.left < 0:
            raise PatchError(f"{self.name}: its hunks sit too far from the lines their headers name: more than "
                             f"{MAX_SEARCH_LINES:,} lines compared while looking for them")
        if self.deadline is not None and time.time() > self.deadline:
            raise PatchError(f"{self.name}: applying it took the whole --budget")


def _apply_hunks(text: str, patch: FilePatch, name: str, search: _Search | None = None) -> str:
    search = search or _Search(None, name)
    lines = _lines_with_ends(text)
    ending = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    bare = [line.removesuffix("\n").removesuffix("\r") for line in lines]
    where: dict[str, list[int]] = {}  # each line's text: the indices it stands at, in order
    for index, line in enumerate(bare):
        where.setdefault(line, []).append(index)
    out: list[str] = []
    at = 0  # next line of the original not yet copied
    for number, hunk in enumerate(patch.hunks, 1):
        start = _locate(bare, where, hunk, at, search)
        if start is None:
            raise PatchError(f"{name}: hunk {number} of {patch.path} does not apply at line {hunk.old_start} "
                             "(its context or removed lines differ from the file)")
        out.extend(lines[at:start])
        last_old = start + len(hunk.old)
        for j, new_line in enumerate(hunk.new):
            last = j == len(hunk.new) - 1 and last_old == len(lines)
            out.append(new_line + ("" if last and hunk.new_ends_without_newline else ending))
        at = last_old
    out.extend(lines[at:])
    return "".join(out)


def _locate(bare: list[str], where: dict[str, list[int]], hunk: Hunk, not_before: int, search: _Search) -> int | None:
    """Where the hunk's old lines are: at its header's line, else the nearest exact match after the previous
    hunk (the nearer above on a tie). Only the places that hold the hunk's first old line are compared."""
    wanted = list(hunk.old)
    last = len(bare) - len(wanted)  # the last place the hunk fits
    stated = max(hunk.old_start - 1, 0) if wanted else hunk.old_start
    if not wanted:  # only added lines: after line ``old_start``, which must exist (git apply refuses it too)
        return max(stated, not_before) if stated <= len(bare) else None
    places = where.get(wanted[0], [])
    low, high = bisect.bisect_left(places, not_before), bisect.bisect_right(places, last)
    above = bisect.bisect_left(places, stated, low, high)  # places[above:high] are at or after the stated line
    down, up = above - 1, above
    while down >= low or up < high:
        if up < high and (down < low or places[up] - stated < stated - places[down]):
            place, up = places[up], up + 1
        else:
            place, down = places[down], down - 1
        search.spend(len(wanted))
        if bare[place:place + len(wanted)] == wanted:
            return place
    return None


def read_patch(path: str) -> tuple[str, str]:
    """(text, name) of a patch file, refused in one line when it is not a small text file."""
    try:
        data = read_regular(path, MAX_PATCH_BYTES)
    except FileNotFoundError:
        raise PatchError(f"{path}: no such file") from None
    except NotRegular as e:
        raise PatchError(f"{path}: {e}: not a patch to judge") from None
    except OSError as e:
        raise PatchError(f"{path}: cannot read it: {e.strerror or e}") from None
    try:
        return data.decode("utf-8"), path
    except UnicodeDecodeError as e:
        raise PatchError(f"{path}: cannot read it as text: not UTF-8 (byte {e.start})") from None
