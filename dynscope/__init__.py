"""dynscope: see what torch.compile did to your program, and why.

``dynscope explain train.py`` runs a script under instrumentation and records a capture;
``dynscope.capture(path)`` does the same around a block of code::

    with dynscope.capture("run.dynscope") as cap:
        model = torch.compile(model)
        model(x)
    for b in cap.load().graph_breaks():
        print(b.location, b.headline)

Importing dynscope is cheap: torch is imported only when a capture starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynscope._version import __version__

if TYPE_CHECKING:
    from dynscope.model import Capture
    from dynscope.recorder import Recorder

__all__ = ["__version__", "capture", "open_capture"]


def _find_checkout_folders() -> None:
    """Let a plain source checkout run (``python -m dynscope`` in it, never installed).

    The card's top-level folders ``tui/``, ``reporters/`` and ``minifier/`` become
    ``dynscope.tui``, ``dynscope.reporters`` and ``dynscope.minifier`` through the install's
    package-dir mapping. Without an install this finder maps those three names, and only them;
    it is asked last, so an installed dynscope is never shadowed.
    """
    import importlib.abc
    import importlib.machinery
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    folders = {f"dynscope.{name}": root / name for name in ("tui", "reporters", "minifier")}
    if not (root / "pyproject.toml").is_file() or not all((f / "__init__.py").is_file() for f in folders.values()):
        return  # an installed dynscope: its own files hold the three packages

    class CheckoutFolders(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
            folder = folders.get(name)
            if folder is None:
                return None
            return importlib.util.spec_from_file_location(name, folder / "__init__.py", submodule_search_locations=[str(folder)])

    if not any(type(f).__name__ == "CheckoutFolders" for f in sys.meta_path):
        sys.meta_path.append(CheckoutFolders())


_find_checkout_folders()


def capture(path: str, *, keep_caches: bool = False, profile: bool = False) -> Recorder:
    """Record what torch.compile does inside a ``with`` block into the capture file ``path``.

    ``profile=True`` also times every compiled graph, graph break and torch.compile'd entry
    point (functions and modules compiled inside the block)."""
    from dynscope.recorder import Recorder

    return Recorder(path, keep_caches=keep_caches, profile=profile)


def open_capture(path: str) -> Capture:
    """Open a capture file for reading (never imports torch, never executes its contents)."""
    from dynscope.model import Capture

    return Capture.open(path)
