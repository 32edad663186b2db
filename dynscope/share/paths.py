"""Paths in a shared bundle: relative to the program's tree, or named by what they are.

A path inside the program's tree (the recorded working directory, or ``--tree``) becomes relative
to it (``src/model.py``), so a maintainer with a checkout of the project sees the same files;
one in an installed package becomes ``<site-packages>/torch/nn/modules/module.py`` and one in the
standard library ``<stdlib>/logging/__init__.py`` (the reader has their own copies); anything else
(a home directory, a temporary directory, another project) becomes ``<path:HASH>``: the same path
gives the same hash within one bundle, so two mentions of one file still match, but the hash is
salted per bundle and the salt is not kept, so a guessed path cannot be confirmed against it.

A recorded directory that is no project (``/``, a temporary folder, a home: dynscope.share.identity)
gives no tree: every path is then named as outside one. In free text a path is found wherever it
stands (after a space, in parentheses or quotes, in a traceback or generated code), with the parts
of its directories that hold spaces or parentheses (``/home/ann/my proj (copy)/x.py``); and so are
``file://`` URLs, ``~/…`` and ``~user/…`` paths, and Windows paths (``C:\\Users\\ann\\x.py``).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable

from dynscope.share.identity import is_tree
from dynscope.share.sources import trie_pattern

# A directory's name in free text: words joined by single spaces (at most five: a sentence is not a
# path; each with a letter or digit, not ``~``-first), parentheses, brackets and the punctuation of
# generated run folders allowed (``my proj (copy)``, Hydra's ``lr=0.1,bs=32``); the path goes on only if
# a ``/`` follows.
_DIR = r"[\w.+@%~()\[\]=,:#!$&{}-]+(?: [.+@%()\[\]=,:#!$&{}-]*\w[\w.+@%~()\[\]=,:#!$&{}-]*){0,4}"
_FILE = r"[\w.+@%~-]*"
# An absolute POSIX path of at least two components, not part of a longer word, a relative path
# or a URL (``https://pytorch.org/docs``: the slash after ``:`` is followed by another slash).
ABSOLUTE_PATH = re.compile(rf"(?<![\w.~/\\-])/(?:{_DIR}/)+{_FILE}")
# Paths that are not written from the root: a file:// URL (its path is named as any path),
# ~/… and ~user/…, and a Windows drive's path.
_FILE_URL = rf"(?i:file)://(?:localhost)?(?P<url_path>/(?:{_DIR}/)*{_FILE})"
_HOME_PATH = rf"(?<![\w.~/\\-])~(?:[A-Za-z_][\w.-]*)?/(?:{_DIR}/)*{_FILE}"
_WINDOWS_PATH = rf"(?<![\w.\\/-])[A-Za-z]:[\\/](?:{_DIR}[\\/])*{_FILE}"
# A path as JSON may escape it (``\/home\/ann\/x.py``) in a payload that is not valid JSON as a whole.
_ESCAPED_PATH = r"(?<![\w.~/\\-])\\/(?:[\w.+@%~-]+\\/)+[\w.+@%~-]*"
_OTHER_PATHS = re.compile("|".join((_HOME_PATH, _WINDOWS_PATH, _ESCAPED_PATH)))
_SITE_PACKAGES = re.compile(r"/(?:site|dist)-packages(?:/|$)")
_STDLIB = re.compile(r"/lib(?:64)?/python\d+(?:\.\d+)?t?(?:/|$)")


class PathMapper:
    def __init__(self, tree: str | None, salt: bytes) -> None:
        self.tree = os.path.normpath(tree) if tree and os.path.isabs(tree) and is_tree(tree) else None
        self._salt = salt
        self.mapped: dict[str, str] = {}  # every path replaced, and by what (for the summary)
        self._known: list[str] = []  # whole paths seen in structured fields, longest first
        self._tails: dict[str, str] = {}  # shortened forms of known paths -> the bundle's name for the path
        self._pattern = re.compile("|".join((_FILE_URL, ABSOLUTE_PATH.pattern)))

    def learn(self, paths: Iterable[str]) -> None:
        """Whole paths from structured fields (a ``str`` event, ``co_filename``): replaced as a
        whole in text too, spaces and all, before the generic pattern sees them; and so are their
        tails that say more than the bundle's name for them: torch shortens paths in guard comments
        by their common directory with its install, one character too far when that is the root
        (``ome/ann/proj/model.py:12`` for /home/ann/proj/model.py), which no absolute-path pattern sees."""
        known = set(self._known)
        known.update(p for p in paths if os.path.isabs(p) and p != "/")
        self._known = sorted(known, key=len, reverse=True)
        for path in self._known:
            self._tails.update(self._tails_of(path))
        # One pass over the text: a replacement (``<site-packages>/torch/x.py``) is never looked at again.
        known_paths = "|".join(re.escape(p) for p in self._known)
        # A known path followed by "/" is the start of a longer one, which the generic pattern takes whole.
        alternatives = [f"(?:{known_paths})(?![\\w.+@%~/-])"] if known_paths else []
        if self._tails:
            alternatives.append(f"(?<![\\w.~/-])(?:{trie_pattern(self._tails)})(?![\\w.+@%~/-])")
        self._pattern = re.compile("|".join([_FILE_URL, *alternatives, ABSOLUTE_PATH.pattern]))

    def _tails_of(self, path: str) -> dict[str, str]:
        shown = self.map_path(path)
        if shown.startswith("<path:"):
            kept = os.path.basename(path)  # a file's own name says nothing of where it is
        elif shown.startswith("<"):
            kept = shown.partition("/")[2]  # torch/nn/functional.py
        else:
            kept = shown  # relative to the tree
        tails: dict[str, str] = {}
        for i in range(1, len(path)):
            if path[i - 1] != "/":
                continue
            for tail in (path[i:], path[i + 1:]):  # and torch's one character too far
                if "/" in tail and len(tail) > len(kept):
                    tails.setdefault(tail, shown)
        return tails

    def map_path(self, path: str) -> str:
        """One path as the bundle names it; relative paths and ``<frozen runpy>`` stay."""
        if not os.path.isabs(path):
            return path
        if path in self.mapped:
            return self.mapped[path]
        norm = os.path.normpath(path)
        if (site := _SITE_PACKAGES.search(norm)) is not None:
            shown = "<site-packages>" + _rest(norm, site.end())
        elif (lib := _STDLIB.search(norm)) is not None:
            shown = "<stdlib>" + _rest(norm, lib.end())
        elif self.tree is not None and (norm == self.tree or norm.startswith(self.tree.rstrip("/") + "/")):
            shown = os.path.relpath(norm, self.tree)
        else:
            shown = self._hashed(norm)
        self.mapped[path] = shown
        return shown

    def _hashed(self, path: str) -> str:
        digest = hashlib.blake2b(path.encode("utf-8", "surrogatepass"), digest_size=5, key=self._salt).hexdigest()
        shown = f"<path:{digest}>"
        self.mapped[path] = shown
        return shown

    def map_text(self, text: str) -> str:
        """Every absolute path in free text (a traceback, a kernel's comment, a config dump)."""
        if "/" not in text and "\\" not in text:
            return text
        text = self._pattern.sub(self._replace, text)
        # The rarer forms, in a second pass only where they can be: a letter-first pattern tried at
        # every letter of every text costs more than all the rest.
        if "~" in text or ":\\" in text or ":/" in text or "\\/" in text:
            text = _OTHER_PATHS.sub(self._replace_other, text)
        return text

    def _replace(self, match: re.Match[str]) -> str:
        found = match.group(0)
        if found in self._tails:
            return self._tails[found]
        if match.group("url_path") is not None:  # file:///x: the scheme stays, the path is named as any path
            return found[:7] + self.map_path(match.group("url_path"))
        return self.map_path(found)

    def _replace_other(self, match: re.Match[str]) -> str:
        found = match.group(0)
        if found.startswith("\\/"):
            return self.map_path(found.replace("\\/", "/"))
        return self._hashed(found)  # ~/x, ~ann/x, C:\\x: never inside the tree


def _rest(path: str, end: int) -> str:
    """What follows a marker (``/site-packages/``), with its leading slash, or nothing."""
    rest = path[end:]
    return "/" + rest if rest else ""
