"""Who and where, in a shared bundle: the user's name, their home, the host, secrets on a command line.

Paths are named by dynscope.share.paths; what is left of a person after that is words: a user name
in ``torchinductor_ann`` or ``~ann``, in a message (``ann@box``), a host name in a rendezvous
address, a token passed as ``--token=sk-…``. share learns them from what it finds — home directories
in the capture's paths (``/home/NAME``, ``/Users/NAME``), ``torchinductor_NAME`` cache folders, the
recorded host name — and from the machine it runs on (the user, their home, the host), and
replaces each wherever it stands as a word of its own: ``<user>``, ``<host>``, ``<secret>``.

A recorded working directory is a program's tree only when it is one: ``/``, a system temporary
folder, a home directory or a top-level system folder is not (:func:`is_tree`).
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import tempfile
from collections import Counter
from collections.abc import Iterable

from dynscope.share.sources import trie_pattern

# Directories that hold many unrelated things: a path under one says nothing of a project.
_SYSTEM_DIRS = frozenset({"/", "/home", "/Users", "/usr", "/var", "/etc", "/opt", "/mnt", "/media", "/srv", "/proc",
                          "/sys", "/dev", "/run", "/root", "/private", "/private/var", "/Volumes", "/export",
                          "/export/home", "/var/folders"})
_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/private/tmp")
# A home directory's owner, as the paths of the usual systems name it.
_HOME = re.compile(r"(?<![\w.-])/(?:home|Users|export/home|usr/home)/([\w.+@-]+)")
# torch's per-user cache folder, as a path names it (/tmp/torchinductor_ann/…; not the config key
# torchinductor_worker_logpath).
_CACHE_USER = re.compile(r"/torchinductor_([\w.+@-]+)(?![^/\s'\"])")
# Names too common or too short to be a person's: replacing them everywhere would blank torch's own text;
# they say nothing about who ran the program anyway.
_GENERIC_USERS = frozenset({"root", "user", "users", "admin", "runner", "ubuntu", "nobody", "jovyan", "torch",
                            "python", "home", "test", "tests", "build", "ci", "docker", "default", "guest",
                            "local", "shared", "data", "work", "app", "cuda", "triton", "inductor", "dynamo",
                            # the words of the bundle's own names (<path:…>, <site-packages>/…): never replaced
                            *("path", "source", "value", "host", "secret", "site", "packages", "stdlib", "frozen")})
_GENERIC_HOSTS = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "docker", *_GENERIC_USERS})
MIN_NAME_CHARS = 3
# key=value and --key value pairs whose key says the value is a secret (a token on a command line,
# an environment variable in a message), and the shapes of common tokens wherever they stand. The key
# ends with the word (HF_TOKEN, --api-key, password; not max_tokens, not tokenizer), a key given as
# ``--key value`` starts with "-", and the value has six characters or more (not ``token: int``). The
# pattern starts at the word itself: what comes before it in the key does not matter, and a pattern
# that tried every prefix of every word would cost a pass per letter.
_SECRET_PAIR = re.compile(r"(?i)(?:token|secret|passw(?:or)?d|api[_-]?key|access[_-]?key|private[_-]?key|credentials?)"
                          r"(?:(\s*[=:]\s*)|(\s+))(['\"]?)([^\s'\",;)\]}<]{6,})")
_TOKEN_SHAPES = re.compile(r"(?<![\w-])(?:sk-[\w-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
                           r"|github_pat_\w{20,}|xox[abprs]-[\w-]{10,}|AKIA[0-9A-Z]{16}|glpat-[\w-]{20,})")


# Words without which a text holds no secret these rules find (most texts: one lower() and a few
# substring checks instead of three pattern passes).
_SECRET_HINTS = ("token", "secret", "passw", "key", "credential", "sk-", "hf_", "gh", "xox", "akia", "glpat", "://",
                 "bearer")
# A URL's password (postgres://ann:hunter2@db/x) and an HTTP bearer token.
_URL_PASSWORD = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s/@:]*:)[^\s/@]+@")
_BEARER = re.compile(r"(?i)(\bbearer\s+)[\w.~+/-]{12,}=*")


def is_tree(path: str) -> bool:
    """Whether ``path`` (absolute) can be a program's tree, whose paths a bundle keeps relative: not
    ``/``, a system temporary folder, a home directory or a top-level system folder."""
    norm = os.path.normpath(path)
    if norm in _SYSTEM_DIRS or os.path.dirname(norm) in ("/home", "/Users", "/export/home"):
        return False
    temps = {*_TEMP_DIRS, tempfile.gettempdir(), os.path.expanduser("~")}
    real = os.path.realpath(norm) if os.path.isabs(norm) else norm
    return not any(norm == os.path.normpath(t) or real == os.path.realpath(t) for t in temps)


def local_names() -> tuple[list[str], list[str]]:
    """(user names, host names) of the machine share runs on: a capture made here names them."""
    users: list[str] = []
    try:
        users.append(getpass.getuser())
    except (KeyError, OSError):  # no entry in the password database (a container's uid)
        pass
    home = os.path.expanduser("~")
    if home not in ("~", "/"):
        users.append(os.path.basename(os.path.normpath(home)))
    hosts = [socket.gethostname()]
    return users, hosts


def users_in(text: str) -> set[str]:
    """User names a text shows: home directories' owners and torch's per-user cache folders."""
    if "/" not in text:
        return set()
    return {m.group(1) for pattern in (_HOME, _CACHE_USER) for m in pattern.finditer(text)}


class IdentityScrubber:
    """Replaces user names, host names and secrets in free text (after paths have been named)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()  # "user" | "host" | "secret": how many were replaced
        self._users: set[str] = set()
        self._hosts: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def learn(self, users: Iterable[str] = (), hosts: Iterable[str] = ()) -> None:
        for user in users:
            if len(user) >= MIN_NAME_CHARS and user.lower() not in _GENERIC_USERS:
                self._users.add(user)
        for host in hosts:
            host = host.strip().rstrip(".")
            if len(host) < MIN_NAME_CHARS or host.lower() in _GENERIC_HOSTS:
                continue
            self._hosts.add(host)
            short = host.split(".", 1)[0]  # ann-laptop of ann-laptop.corp.example.com
            if len(short) >= MIN_NAME_CHARS and short.lower() not in _GENERIC_HOSTS:
                self._hosts.add(short)
        self._pattern = None

    @property
    def users(self) -> frozenset[str]:
        return frozenset(self._users)

    @property
    def hosts(self) -> frozenset[str]:
        return frozenset(self._hosts)

    def scrub(self, text: str) -> str:
        if len(text) < MIN_NAME_CHARS:
            return text
        lowered = text.lower()
        if any(hint in lowered for hint in _SECRET_HINTS):
            text = _SECRET_PAIR.sub(self._secret_pair, text)
            text = _TOKEN_SHAPES.sub(self._secret, text)
            text = _URL_PASSWORD.sub(self._secret_after, text)
            text = _BEARER.sub(self._secret_after, text)
        pattern = self._compiled()
        return text if pattern is None else pattern.sub(self._name, text)

    def _compiled(self) -> re.Pattern[str] | None:
        if self._pattern is None and (self._users or self._hosts):
            # A name stands alone: no letter or digit on either side (torchinductor_ann, ann@box and
            # /home/ann all name ann); the trie tries the longest first (a host that contains the user's name).
            # One trie-shaped pattern: a forged capture naming thousands of homes costs one pass, not one per name.
            names = trie_pattern(self._users | self._hosts)
            self._pattern = re.compile(f"(?<![A-Za-z0-9])(?:{names})(?![A-Za-z0-9])")
        return self._pattern

    def _name(self, m: re.Match[str]) -> str:
        kind = "host" if m.group(0) in self._hosts else "user"
        self.counts[kind] += 1
        return f"<{kind}>"

    def _secret_pair(self, m: re.Match[str]) -> str:
        if m.group(2) is not None and not _is_option(m.string, m.start()):
            return m.group(0)  # "token abcdefgh" in prose: only an option's value follows a space
        self.counts["secret"] += 1
        return m.group(0)[:m.start(4) - m.start()] + "<secret>"

    def _secret_after(self, m: re.Match[str]) -> str:
        self.counts["secret"] += 1
        return m.group(1) + "<secret>" + ("@" if m.group(0).endswith("@") else "")

    def _secret(self, m: re.Match[str]) -> str:
        self.counts["secret"] += 1
        return "<secret>"


def _is_option(text: str, at: int) -> bool:
    """Whether the word that ends at ``at`` + its key is an option (``--api-key``, ``-token``)."""
    start = at
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
        start -= 1
    return text[start:start + 1] == "-"
