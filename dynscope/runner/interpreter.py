"""The flags of this python, which every child dynscope starts for the program is given too."""

from __future__ import annotations

import io
import subprocess
import sys


def interpreter_flags() -> list[str]:
    """The flags this python runs with (-O, -X ..., -W ..., -u), so the program gets them too."""
    flags = list(getattr(subprocess, "_args_from_interpreter_flags", list)())
    if isinstance(getattr(sys.stdout, "buffer", None), io.FileIO):  # started with -u (torchrun does)
        flags.append("-u")
    return flags
