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
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def private_cache_dir(purpose: str) -> Iterator[str]:
    """A fresh, empty cache directory for the runs inside the block; removed at its end."""
    with tempfile.TemporaryDirectory(prefix=f"dynscope-{purpose}-caches-", ignore_cleanup_errors=True) as directory:
        yield directory
