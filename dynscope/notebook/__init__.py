"""dynscope in Jupyter (and VS Code's notebooks): ``%load_ext dynscope``, then ``%%dynscope``.

A front end like the command line (dynscope.commands): it starts recordings
(dynscope.recorder) and shows them with a view (dynscope.reporters.notebook). IPython is
imported only here, and only when the extension is loaded; torch only when a recording starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dynscope.notebook.display import CaptureView

__all__ = ["load_ipython_extension", "unload_ipython_extension", "show"]


def load_ipython_extension(ipython: Any) -> None:
    from dynscope.notebook.magics import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from dynscope.notebook.magics import unregister

    unregister(ipython)


def show(path: str) -> CaptureView:
    """An existing capture, shown as its summary when it is a cell's value."""
    from dynscope.notebook.display import CaptureView

    return CaptureView.open(path)
