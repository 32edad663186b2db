"""``fix --diff FILE`` and ``fix --apply``: the verified source rewrites, written out.

Only what the combined run proved is written (its verdict fixed or improved, outputs equal).
``--diff FILE`` writes the changes to the program's own files as one unified diff that
``git apply`` takes where the user stands: paths from the repository's root (``git rev-parse
--show-toplevel``), or from the current directory outside a repository (``rebased``); the changes to an installed library go to a diff of
their own beside it, ``<package>-<version>.diff`` (paths from the library's top, as an upstream
pull request wants them). ``--apply`` writes the changes into the program's own files, each kept
first as ``FILE.orig``; never a file of an installed package, never one outside the program's
tree, never a file whose text changed since the runs read it.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace

from dynscope.analysis.fix_document import FixDocument
from dynscope.analysis.source_edits import SourceEdit
from dynscope.errors import DynscopeError
from dynscope.fix.source_reader import MAX_SOURCE_BYTES
from dynscope.store.lock import file_kind
from dynscope.store.regular import read_regular

STDOUT = "-"  # `--diff -`


@dataclass(frozen=True)
class DiffFile:
    path: str
    text: str
    what: str  # "the program's files" or "transformers 5.24.0"


def diff_base(cwd: str) -> str:
    """Where ``git apply`` will be run: the root of the repository holding ``cwd``, else ``cwd``."""
    try:
        done = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):  # no git here: the current directory
        return cwd
    top = done.stdout.strip()
    return top if done.returncode == 0 and top and os.path.isdir(top) else cwd


def rebased(doc: FixDocument, base: str) -> FixDocument:
    """``doc`` with the program's own files named from ``base`` in the combined change (its edits
    and the patch shown), so the printed change and ``--diff`` apply from there; an installed
    library's files keep their names from the package on."""
    combined = doc.combined
    if combined is None or not combined.edits:
        return doc
    patch = combined.patch
    edits: list[SourceEdit] = []
    for e in combined.edits:
        shown = os.path.relpath(e.file.path, base).replace(os.sep, "/")
        # a file outside ``base`` keeps its name in the program's tree (`git apply` refuses "../")
        if e.file.package is None and not shown.startswith("../"):
            moved = replace(e, file=replace(e.file, shown=shown))
            patch = patch.replace(e.diff().rstrip("\n"), moved.diff().rstrip("\n"))
            e = moved
        edits.append(e)
    return replace(doc, combined=replace(combined, patch=patch, edits=tuple(edits)))


def diff_files(path: str, edits: Sequence[SourceEdit]) -> list[DiffFile]:
    """The diffs to write for ``--diff path``: the program's own files in ``path``, each installed
    package's in ``<package>-<version>.diff`` next to it."""
    own = [e for e in edits if e.file.package is None]
    out: list[DiffFile] = []
    if own:
        out.append(DiffFile(path, "".join(e.diff() for e in own), "the program's files"))
    if path == STDOUT:  # `--diff -`: the libraries' diffs go to the current directory
        path = os.path.join(os.getcwd(), "fix.diff")
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
    import sys

    for f in files:
        if f.path == STDOUT:
            sys.stdout.write(f.text)
            sys.stdout.flush()
            continue
        if os.path.islink(f.path):  # a name planted in a stranger's tree: its target is never written
            raise DynscopeError(f"cannot write {f.path}: it is a symbolic link (remove it, or name another file)")
        try:
            _write_regular(f.path, f.text)
        except OSError as e:
            raise DynscopeError(f"cannot write {f.path}: {e.strerror}") from None


def _write_regular(path: str, text: str) -> None:
    """Write ``text`` to ``path``, a regular file or none yet: a FIFO or device there is refused
    (opened without blocking, checked with fstat), and a link is never followed (O_NOFOLLOW: one
    swapped in after the check above fails the open)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW
    descriptor = os.open(path, flags, 0o644)
    with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as out:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise DynscopeError(f"cannot write {path}: it is {file_kind(mode)}")
        out.truncate(0)
        out.write(text)


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
            _write_one(e.file.path, e.new)
        except OSError as err:
            raise DynscopeError(f"--apply: cannot write {e.file.shown}: {err.strerror} (written so far: "
                                f"{', '.join(written) or 'none'})") from None
        written.append(e.file.shown)
    return written


def _write_one(path: str, text: str) -> None:
    """``path.orig`` and the new text, each written to a file made new here (``O_EXCL``): a name planted
    in the tree (``model.py.orig`` or a temporary name, as a link to ~/.bashrc) is never written through.
    The new text replaces the file by rename, which replaces a link put in its place, never its target."""
    backup = os.open(path + ".orig", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with open(path, "rb") as source, os.fdopen(backup, "wb") as kept:
        shutil.copyfileobj(source, kept)
    shutil.copystat(path, path + ".orig", follow_symlinks=False)
    descriptor, temporary = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".dynscope-new",
                                             dir=os.path.dirname(path))
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
