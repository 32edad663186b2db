"""Run a callback right after a module is first imported, without importing it ourselves.

Some probes hook into modules that cost a second to import (Inductor's autotuner pulls in
its lowerings and kernel templates) and that a run may never use (an eager-backend run never
imports them). Importing them up front would make every recorded run that much slower; this
lets such a probe install itself when the program's own compile imports the module.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any


class _CallbackLoader(Loader):
    """The module's own loader, then the callback (once the module's code has run)."""

    def __init__(self, loader: Any, callback: Callable[[ModuleType], None]) -> None:
        self.loader = loader
        self.callback = callback

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.callback(module)


class _PostImportFinder(MetaPathFinder):
    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callback = callback
        self._finding = threading.local()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> ModuleSpec | None:
        if fullname != self.name or getattr(self._finding, "busy", False):
            return None
        self._finding.busy = True
        try:  # ask the finders after this one, as the import system would have
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._finding.busy = False
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        self.remove()  # once: a re-import is not a first import
        spec.loader = _CallbackLoader(spec.loader, self.callback)
        return spec

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> Callable[[], None]:
    """Call ``callback(module)`` once ``name`` is imported: now if it already is, else right
    after its first import. Returns the undo (which does not undo a callback already made)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return lambda: None
    finder = _PostImportFinder(name, callback)
    sys.meta_path.insert(0, finder)
    return finder.remove
