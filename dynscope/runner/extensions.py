"""Child extensions: modules a ChildSpec names, started in the child once the recorder runs.

An extension is a module of dynscope with one entry point::

    def start_in_child(recorder: Recorder, payload: str) -> ChildHooks: ...

``payload`` is the JSON text its parent put in the spec (the extension reads it into its own
typed record). The runner imports the module by the name in the spec (dynscope/runner/spec.py
accepts only ``dynscope.*`` names) and never statically: the tools above it (``fix``,
``minifier``) plug in without an arrow from the runner up to them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dynscope.errors import DynscopeError
from dynscope.runner.spec import ChildExtension, check_extension_name

if TYPE_CHECKING:
    from dynscope.recorder import Recorder

ENTRY_POINT = "start_in_child"


@dataclass(frozen=True)
class ProgramStop:
    """An extension ended the program on purpose (minify: at its first failing graph): the child
    records ``record`` as the program's exception, says ``message`` and exits with ``exit_code``."""

    record: BaseException
    message: str
    exit_code: int


def _nothing() -> None:
    return None


def _not_ours(_exc: BaseException) -> ProgramStop | None:
    return None


@dataclass(frozen=True)
class ChildHooks:
    """What a started extension asks of the child: ``remove`` once the program ended (before the
    recorder stops), and ``stop_for(exc)`` to say whether an exception out of the program is its
    own way of stopping it."""

    remove: Callable[[], None] = _nothing
    stop_for: Callable[[BaseException], ProgramStop | None] = _not_ours


def start_extensions(extensions: Sequence[ChildExtension], recorder: Recorder) -> list[ChildHooks]:
    """Import and start each named extension, in order."""
    started = []
    for extension in extensions:
        module_name = check_extension_name(extension.module)
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise DynscopeError(f"cannot load the child extension {module_name}: {e}", exit_code=2) from None
        entry = getattr(module, ENTRY_POINT, None)
        if not callable(entry):
            raise DynscopeError(f"{module_name} is not a child extension (it has no {ENTRY_POINT})", exit_code=2)
        hooks = entry(recorder, extension.payload)
        started.append(hooks if isinstance(hooks, ChildHooks) else ChildHooks())
    return started


def remove_all(hooks: list[ChildHooks]) -> None:
    for h in reversed(hooks):
        h.remove()
    hooks.clear()  # removed once, whichever way the program ended


def stop_for(hooks: list[ChildHooks], exc: BaseException) -> ProgramStop | None:
    for h in hooks:
        stop = h.stop_for(exc)
        if stop is not None:
            return stop
    return None
