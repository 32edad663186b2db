"""Where a node of a compiled graph lives: the generated kernel that computes it (from the output
code) and the user's source line and stack (from the node's ``stack_trace``). No torch."""

from __future__ import annotations

import functools
import importlib.util
import os
import re

from dynscope.events import BreakFrame
from dynscope.model.output_code import parse_stack_text

# The compiled code calls run_intermediate_hooks('<post-grad node>', bufN) right after the launch
# (or the extern call) that filled bufN.
_HOOK = re.compile(r"""^\s*run_intermediate_hooks\(['"](?P<node>[^'"]+)['"]""")
_GENERATED_LAUNCH = re.compile(r"^\s*(?:\w+\s*=\s*)?(?P<name>(?:cpp|triton)_\w+)(?:\.run)?\(")
_EXTERN_LAUNCH = re.compile(r"^\s*(?:\w+\s*=\s*)?(?:extern_kernels|torch\.ops|aten)\.")
# Code FX generated (a graph module's forward) is not the user's either.
_GENERATED = "<eval_with_key>"
# dynscope's own packages: the card's top-level folders are dynscope.tui / .reporters / .minifier.
_DYNSCOPE_PACKAGES = ("dynscope", "dynscope.tui", "dynscope.reporters", "dynscope.minifier")


@functools.lru_cache(maxsize=1)
def library_roots() -> tuple[str, ...]:
    """The folders torch and dynscope are installed in (each as given and with its links resolved):
    a frame under one of them is theirs, not the user's. Found without importing torch."""
    folders: list[str] = []
    for name in ("torch", *_DYNSCOPE_PACKAGES):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            folders += list(spec.submodule_search_locations)
    return tuple(dict.fromkeys(root for folder in folders
                               for root in (os.path.normpath(folder), os.path.realpath(folder))))


def is_library_file(file: str, roots: tuple[str, ...]) -> bool:
    """Whether ``file`` lies inside one of the folders ``roots`` (by path prefix: a user's folder merely
    named "torch" or "dynscope" is the user's)."""
    if _GENERATED in file:
        return True
    paths = {os.path.normpath(file), os.path.realpath(file)}
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for path in paths for root in roots)


def kernels_by_node(output_code: str) -> dict[str, str]:
    """Post-grad node name -> the generated kernel whose launch precedes its last hook ("" when an
    extern (library) call computed it)."""
    found: dict[str, str] = {}
    last = ""
    for line in output_code.splitlines():
        hook = _HOOK.match(line)
        if hook is not None:
            found[hook.group("node")] = last  # the last kernel to write it (one may finish it in place)
            continue
        launch = _GENERATED_LAUNCH.match(line)
        if launch is not None:
            last = launch.group("name")
        elif _EXTERN_LAUNCH.match(line):
            last = ""
    return found


def user_stack(stack_trace: str | None, roots: tuple[str, ...] | None = None) -> tuple[BreakFrame, ...]:
    """The user's frames of a node's ``stack_trace``, outermost first: those in ``roots`` (by default
    torch's and dynscope's install folders) left out."""
    if not stack_trace:
        return ()
    library = library_roots() if roots is None else roots
    return tuple(BreakFrame(file=f.file, line=f.line, function=f.function, code=f.code)
                 for f in parse_stack_text(stack_trace)
                 if f.file is not None and not is_library_file(f.file, library))


def source_of(stack: tuple[BreakFrame, ...]) -> str:
    """"path:line" of the innermost user frame, "" when there is none."""
    if not stack or stack[-1].file is None:
        return ""
    return f"{stack[-1].file}:{stack[-1].line}"
