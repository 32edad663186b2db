"""``fix --diff FILE`` and ``fix --apply``: the verified source rewrites, written out.

Only what the combined run proved is written (its verdict fixed or improved, outputs equal).
``--diff FILE`` writes the changes to the program's own files as one unified diff that
``git apply`` takes in the program's tree; the changes to an installed library go to a diff of
their own beside it, ``<package>-<version>.diff`` (paths from the library's top, as an upstream
pull request wants them). ``--apply`` writes the changes into the program's own files, each kept
first as ``FILE.orig``; never a file of an installed package, never one outside the program's
tree, never a file whose text changed since the runs read it.

The program's tree may come from a stranger (a cloned repository, a capture's directory), so no
name beside the files is trusted: ``FILE.orig`` is created only where nothing is (not even a link),
the new text goes to a fresh temporary file (``mkstemp``) renamed over the file, and a diff is never
written through a link (a ``transformers-5.24.0.diff`` planted as a link to ``~/.bashrc``).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from dynscope.analysis.source_edits import SourceEdit
from dynscope.errors import DynscopeError
from dynscope.fix.source_reader import MAX_SOURCE_BYTES
from dynscope.fix.unified_diff import read_regular


@dataclass(frozen=True)
class DiffFile:
    path: str
    text: str
    what: str  # "the program's files" or "transformers 5.24.0"


def diff_files(path: str, edits: Sequence[SourceEdit]) -> list[DiffFile]:
    """The diffs to write for ``--diff path``: the program's own files in ``path``, each installed
    package's in ``<package>-<version>.diff`` next to it."""
    own = [e for e in edits if e.file.package is None]
    out: list[DiffFile] = []
    if own:
        out.append(DiffFile(path, "".join(e.diff() for e in own), "the program's files"))
    packages: dict[str, list[SourceEdit]] = {}
    for e in edits:
        if e.file.package is not None:
            packages.setdefault(e.file.library or e.file.package, []).append(e)
    directory = os.path.dirname(os.path.abspath(path))
    for library, changed in packages.items():
        first = changed[0].file
        name = f"{first.package}-{first.version}.diff" if first.version else f"{first.package}.diff"
        out.append(DiffFile(os.path.join(directory, _plain(name)), "".join(e.diff() for e in changed), library))
    return out


def _plain(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._+-" else "_" for c in name)


def write_diffs(files: Sequence[DiffFile]) -> None:
    for f in files:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
            | getattr(os, "O_CLOEXEC", 0)
        try:
            if os.path.islink(f.path):
                raise DynscopeError(f"cannot write {f.path}: it is a symbolic link (remove it, or name another file)")
            fd = os.open(f.path, flags, 0o666)
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                if not stat.S_ISREG(os.fstat(out.fileno()).st_mode):
                    raise DynscopeError(f"cannot write {f.path}: not a regular file")
                out.write(f.text)
        except OSError as e:
            raise DynscopeError(f"cannot write {f.path}: {e.strerror}") from None


def applicable(edits: Sequence[SourceEdit], root: str) -> tuple[list[SourceEdit], list[str]]:
    """(the edits ``--apply`` writes, one line per edit it leaves alone and why)."""
    real_root = os.path.realpath(root)
    mine: list[SourceEdit] = []
    left: list[str] = []
    for e in edits:
        real = os.path.realpath(e.file.path)
        if e.file.package is not None:
            left.append(f"{e.file.shown}: in the installed package {e.file.library}; never changed in place "
                        "(see its diff)")
        elif os.path.commonpath([real, real_root]) != real_root:
            left.append(f"{e.file.shown}: outside the program's tree ({root})")
        else:
            mine.append(e)
    return mine, left


def apply_edits(edits: Sequence[SourceEdit]) -> list[str]:
    """Write each edit into its file, the original kept as ``FILE.orig``. Every file is checked
    first (unchanged since the runs read it, no ``.orig`` in the way), so either all are written
    or none."""
    for e in edits:
        try:
            now = read_regular(e.file.path, MAX_SOURCE_BYTES).decode("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise DynscopeError(f"--apply: cannot read {e.file.shown}: {getattr(err, 'strerror', None) or err}") from None
        if now != e.old:
            raise DynscopeError(f"--apply: {e.file.shown} changed since fix read it; nothing written (run fix again)")
        if os.path.lexists(e.file.path + ".orig"):
            raise DynscopeError(f"--apply: {e.file.shown}.orig exists (a backup from before?); nothing written "
                                "(move it away first)")
    written: list[str] = []
    for e in edits:
        try:
            with open(e.file.path, "rb") as original, open(e.file.path + ".orig", "xb") as backup:  # x: O_EXCL
                shutil.copyfileobj(original, backup)
            shutil.copystat(e.file.path, e.file.path + ".orig")
            directory, name = os.path.split(e.file.path)
            fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".dynscope-new", dir=directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                    f.write(e.new)
                shutil.copymode(e.file.path, temporary)
                os.replace(temporary, e.file.path)
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError as err:
            raise DynscopeError(f"--apply: cannot write {e.file.shown}: {err.strerror} (written so far: "
                                f"{', '.join(written) or 'none'})") from None
        written.append(e.file.shown)
    return written
