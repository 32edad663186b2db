"""A scratch copy of the program's working directory, one per run of ``dynscope fix``.

Every run (the baseline and each trial) starts in its own copy of the directory the program
runs in, made from the untouched original, so what one run writes there (a log it appends to, a
results file) is not what the next run reads, and the user's directory stays as it was. Trials run
side by side, so restoring one directory between runs could not keep them apart; copies can.

What a copy holds: every directory made anew, every regular file up to COPY_MAX_BYTES copied (up
to COPY_TOTAL_BYTES in all); everything else is a symbolic link to the original, so the program
still sees all of its inputs: larger files (datasets, checkpoints), symbolic links, special
files, hidden directories and ``__pycache__`` (linked whole), anything on another file system
(``/proc``, ``/sys``, a mount: never read here), and whatever lies past MAX_ENTRIES.
A program that writes into one of those links writes into the original. Output directories of
``dynscope fix`` itself (marked by their lock file) are left out. Nothing here opens anything but
a regular file it copies.

The program's code is not run from the copy: dynscope/runner/program.py resolves the script and
the module search path in the original directory before it changes into the copy, so file names
in every run's capture are the same and runs can be compared.
"""

from __future__ import annotations

import os
import shutil
from collections import deque

from dynscope.fix.outdir import LOCK_NAME

COPY_MAX_BYTES = 1 << 20  # a larger file is linked: most likely an input, and copying it per run costs
COPY_TOTAL_BYTES = 64 << 20  # copied per run, at most
MAX_ENTRIES = 2_000  # directory entries looked at per copy (each costs a stat, a copy or a link); past it: linked whole


class TooLarge(Exception):
    """The working directory itself has more entries than a copy may hold."""


def make(source: str, target: str) -> None:
    """Copy ``source`` (absolute) into the new directory ``target``, as described above."""
    device = os.stat(source).st_dev
    os.mkdir(target)
    remaining = MAX_ENTRIES
    copied = 0
    pending = deque([(source, target)])
    while pending:
        src_dir, dst_dir = pending.popleft()
        try:
            entries = _list(src_dir, remaining)
        except OSError:
            if src_dir == source:
                raise
            entries = None
        if entries is None:  # too many entries, or unreadable: the directory is seen, not copied
            if src_dir == source:
                raise TooLarge(f"{source} has more than {MAX_ENTRIES:,} entries")
            os.rmdir(dst_dir)
            os.symlink(src_dir, dst_dir)
            continue
        remaining -= len(entries)
        for entry in entries:
            dst = os.path.join(dst_dir, entry.name)
            if _device(entry) != device:  # a mount point (or gone): seen through a link, never read
                os.symlink(entry.path, dst)
            elif entry.is_dir(follow_symlinks=False):
                if os.path.lexists(os.path.join(entry.path, LOCK_NAME)):
                    continue  # a dynscope fix output directory (this run's own among them)
                if entry.name.startswith(".") or entry.name == "__pycache__":
                    os.symlink(entry.path, dst)
                else:
                    os.mkdir(dst)
                    pending.append((entry.path, dst))
            elif entry.is_file(follow_symlinks=False) and _fits(entry, copied):
                try:
                    shutil.copy2(entry.path, dst, follow_symlinks=False)
                    copied += entry.stat(follow_symlinks=False).st_size
                except OSError:  # unreadable: link it, the program meets the same error it would
                    _remove_partial(dst)
                    os.symlink(entry.path, dst)
            else:
                os.symlink(entry.path, dst)


def remove(target: str | None) -> None:
    """Delete a copy (links are removed, never followed)."""
    if target and os.path.islink(target):
        os.remove(target)
    elif target and os.path.lexists(target):
        shutil.rmtree(target, ignore_errors=True)


def _list(directory: str, limit: int) -> list[os.DirEntry] | None:
    """The directory's entries, or None when there are more than ``limit`` (not all are read)."""
    found: list[os.DirEntry[str]] = []
    with os.scandir(directory) as it:
        for entry in it:
            if len(found) >= limit:
                return None
            found.append(entry)
    return found


def _device(entry: os.DirEntry) -> int | None:
    try:
        return entry.stat(follow_symlinks=False).st_dev
    except OSError:
        return None


def _fits(entry: os.DirEntry, copied: int) -> bool:
    try:
        size = entry.stat(follow_symlinks=False).st_size
    except OSError:
        return False
    return size <= COPY_MAX_BYTES and copied + size <= COPY_TOTAL_BYTES


def _remove_partial(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
