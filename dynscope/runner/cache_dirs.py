"""Where a recording child's compile caches live: the user's own, or a directory of dynscope's.

``dynscope explain`` runs the program with the caches as the user has them (their
TORCHINDUCTOR_CACHE_DIR, or torch's default). A run that must not touch them gets a private
directory, given to the child in its spec (``ChildSpec.cache_dir``, which sets Inductor's and
Triton's directories before torch reads them): ``explain --cold`` (caches off, so every stage
runs: with caches off, Inductor still leaves a temporary directory per compile under the cache
directory, which would pollute the user's), ``explain --warm`` (a cold then a warm run that
share one), and the trials of fix, numerics and minify (which share one, seeded by their
baseline). The directory is made fresh and removed after, whatever happened in between.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def private_cache_dir(purpose: str) -> Iterator[str]:
    """A fresh, empty cache directory for the runs inside the block; removed at its end."""
    with tempfile.TemporaryDirectory(prefix=f"dynscope-{purpose}-caches-", ignore_cleanup_errors=True) as directory:
        yield directory


def cache_environment(directory: str) -> dict[str, str]:
    """The variables that put Inductor's and Triton's caches in ``directory`` (as the recording
    child sets them from ``ChildSpec.cache_dir``)."""
    return {"TORCHINDUCTOR_CACHE_DIR": directory, "TRITON_CACHE_DIR": os.path.join(directory, "triton")}


@contextlib.contextmanager
def caches_in(directory: str | None) -> Iterator[None]:
    """This process's environment names ``directory`` for the compile caches inside the block (for
    a helper process started there, such as a fork server, which imports torch with it); None:
    unchanged."""
    if directory is None:
        yield
        return
    saved = {name: os.environ.get(name) for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    os.environ.update(cache_environment(directory))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class SharedCacheDir:
    """One private cache directory for all the runs of one tool session (fix's baseline and
    trials): the first run's compiles fill it and every later run reads it, so a trial that leaves
    a graph unchanged loads it instead of compiling it again, while one whose setting changes the
    cache key misses, as it should. Made at once; ``remove()`` deletes it."""

    def __init__(self, purpose: str) -> None:
        self.path = tempfile.mkdtemp(prefix=f"dynscope-{purpose}-caches-")

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
