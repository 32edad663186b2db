"""dynscope: see what torch.compile did to your program, and why.

``dynscope explain train.py`` runs a script under instrumentation and records a capture;
``dynscope.capture(path)`` does the same around a block of code::

    with dynscope.capture("run.dynscope") as cap:
        model = torch.compile(model)
        model(x)
    for b in cap.load().graph_breaks():
        print(b.location, b.headline)

In Jupyter, ``%load_ext dynscope`` adds ``%%dynscope`` (a cell under capture, shown as its
summary) and ``%dynscope`` (docs/notebook.md).

Importing dynscope is cheap: torch is imported only when a capture starts, IPython only when
the notebook extension is loaded.
"""

import os as _os  # frozen: imported before anything is looked up on sys.path
import sys as _sys

# `python -m dynscope` puts the directory it starts in first on sys.path, and a json.py or typing.py a
# stranger's tree holds there would be imported in place of the standard library's. Python is
# importing this package to find dynscope.__main__ (sys.argv[0] is still "-m"): nothing has been
# looked up there yet (no `from __future__ import` here: __future__ is a module on sys.path), and
# nothing of the program's is wanted there (its child puts its own
# directory first). A source checkout run from its root keeps it: that is where dynscope is.
if (_sys.argv[:1] == ["-m"] and _sys.path and _sys.path[0] == _os.getcwd()
        and _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))) != _os.getcwd()):
    del _sys.path[0]

from typing import TYPE_CHECKING, Any  # noqa: E402

from dynscope._version import __version__  # noqa: E402

if TYPE_CHECKING:
    from dynscope.block_capture import BlockCapture
    from dynscope.model import Capture

__all__ = ["__version__", "capture", "load_ipython_extension", "open_capture"]


def capture(path: str, *, keep_caches: bool = False, profile: bool = False) -> "BlockCapture":
    """Record what torch.compile does inside a ``with`` block into the capture file ``path``.

    ``profile=True`` also times every compiled graph, graph break and torch.compile'd entry
    point (functions and modules compiled inside the block)."""
    from dynscope.block_capture import BlockCapture

    return BlockCapture(path, keep_caches=keep_caches, profile=profile)


def open_capture(path: str) -> "Capture":
    """Open a capture file for reading (never imports torch, never executes its contents)."""
    from dynscope.model import Capture

    return Capture.open(path)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext dynscope``: the ``%%dynscope`` and ``%dynscope`` magics (dynscope.notebook)."""
    from dynscope.notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from dynscope.notebook import unload_ipython_extension as unload

    unload(ipython)
