"""Where a node of a compiled graph lives: the generated kernel that computes it (from the output
code) and the user's source line and stack (from the node's ``stack_trace``). No torch."""

from __future__ import annotations

import os
import re

from dynscope.events import BreakFrame
from dynscope.model.output_code import parse_stack_text

# The compiled code calls run_intermediate_hooks('<post-grad node>', bufN) right after the launch
# (or the extern call) that filled bufN.
_HOOK = re.compile(r"""^\s*run_intermediate_hooks\(['"](?P<node>[^'"]+)['"]""")
_GENERATED_LAUNCH = re.compile(r"^\s*(?:\w+\s*=\s*)?(?P<name>(?:cpp|triton)_\w+)(?:\.run)?\(")
_EXTERN_LAUNCH = re.compile(r"^\s*(?:\w+\s*=\s*)?(?:extern_kernels|torch\.ops|aten)\.")
# Frames of torch itself (and of dynscope) are not the user's.
_NOT_USER = (os.sep + "torch" + os.sep, os.sep + "dynscope" + os.sep, "<eval_with_key>")


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


def user_stack(stack_trace: str | None) -> tuple[BreakFrame, ...]:
    """The user's frames of a node's ``stack_trace`` (torch's and dynscope's left out), outermost first."""
    if not stack_trace:
        return ()
    return tuple(BreakFrame(file=f.file, line=f.line, function=f.function, code=f.code)
                 for f in parse_stack_text(stack_trace)
                 if f.file is not None and not any(marker in f.file for marker in _NOT_USER))


def source_of(stack: tuple[BreakFrame, ...]) -> str:
    """"path:line" of the innermost user frame, "" when there is none."""
    if not stack or stack[-1].file is None:
        return ""
    return f"{stack[-1].file}:{stack[-1].line}"
