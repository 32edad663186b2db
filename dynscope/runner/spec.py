"""What a recording child runs: one record that every parent builds and the child alone reads.

``dynscope explain`` (the launcher), the eager twin, ``dynscope fix``'s trial runs and
``dynscope minify``'s detection run all start the same child (dynscope/runner/child.py), as a
fresh ``python -m dynscope.runner.child SPEC`` or forked from the fork server
(dynscope/runner/fork_server.py). What differs between them is said here, never in environment
variables: the program, the capture, the recorder's options, the directory to run in, and the
child *extensions* -- modules of dynscope that the child imports by name and starts once the
recorder runs (``dynscope.fix.apply`` applies a trial's remedies, ``dynscope.minifier.child``
stops the program at its first failing graph). Naming them here keeps the runner below the tools:
it imports no extension, it only loads the one a parent named.

Stdlib only: the launcher never imports torch, and the spec crosses the process boundary as JSON.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from dynscope.runner.program import Program

# A child extension is a module of dynscope, named with dots: nothing else is imported on a
# spec's say (a spec is written by dynscope, but a name like "os" or "../x" must not be loadable).
_EXTENSION_NAME = re.compile(r"dynscope(\.[A-Za-z_][A-Za-z0-9_]*)+")
_PROGRAM_KINDS = ("script", "module")
# A fresh child's argument "fd:N": its spec is in the file open on inherited descriptor N
# (dynscope.runner.launcher.start_fresh_child); a spec itself is a JSON object.
SPEC_FD_PREFIX = "fd:"
MAX_SPEC_BYTES = 1 << 30  # as the fork server's largest request


def spec_text(argument: str) -> str:
    """The spec's JSON text: ``argument`` itself, or what the descriptor it names holds."""
    if not argument.startswith(SPEC_FD_PREFIX):
        return argument
    try:
        fd = int(argument[len(SPEC_FD_PREFIX):])
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)
    except (ValueError, OSError) as e:
        raise SpecError(f"cannot read the child spec from {argument}: {e}") from None
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"a child spec over {MAX_SPEC_BYTES:,} bytes")
    return data.decode("utf-8", "replace")


class SpecError(ValueError):
    """A child spec that is not one dynscope wrote (bad JSON, a missing or odd field)."""


def check_extension_name(module: object) -> str:
    """``module`` if it names a module of dynscope (``dynscope.fix.apply``); SpecError otherwise."""
    if not isinstance(module, str) or _EXTENSION_NAME.fullmatch(module) is None:
        raise SpecError(f"not a dynscope module: {module!r} (child extensions are modules named dynscope.*)")
    return module


@dataclass(frozen=True)
class ChildExtension:
    """A module the child starts before the program runs; ``payload`` is JSON text that the
    extension reads into its own typed record (the runner does not look inside)."""

    module: str
    payload: str = "{}"

    def __post_init__(self) -> None:
        check_extension_name(self.module)
        if not isinstance(self.payload, str):
            raise SpecError(f"the payload of {self.module} is not JSON text")


@dataclass(frozen=True)
class ChildSpec:
    """Everything the recording child needs to run the program as python would."""

    program: Program
    capture: str  # the capture file the child's recorder writes
    command: tuple[str, ...]  # the dynscope command line recorded in the capture
    keep_caches: bool = False
    profile: bool = False  # explain --profile: time every compiled call
    force_eager: bool = False  # the eager twin: every torch.compile'd function runs eager
    workdir: str | None = None  # where the program runs (fix: a scratch copy); None: here
    # The compile caches' directory (Inductor's and Triton's), whatever the user's environment says:
    # a private one (dynscope.runner.cache_dirs: explain --cold and --warm, the tools' trials); None: the user's own
    cache_dir: str | None = None
    sigint_notes_fd: int | None = None  # the launcher's SIGINT relay (dynscope/runner/interrupts.py)
    extensions: tuple[ChildExtension, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.program.kind not in _PROGRAM_KINDS:
            raise SpecError(f"unknown program kind {self.program.kind!r}")

    def to_json(self) -> str:
        return json.dumps({
            "program": {"kind": self.program.kind, "target": self.program.target, "args": list(self.program.args)},
            "capture": self.capture,
            "command": list(self.command),
            "keep_caches": self.keep_caches,
            "profile": self.profile,
            "force_eager": self.force_eager,
            "workdir": self.workdir,
            "cache_dir": self.cache_dir,
            "sigint_notes_fd": self.sigint_notes_fd,
            "extensions": [{"module": e.module, "payload": e.payload} for e in self.extensions],
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ChildSpec:
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise SpecError(f"a child spec is not JSON: {e}") from None
        data = _object(raw, "the spec")
        program = _object(data.get("program"), "program")
        extensions = data.get("extensions", [])
        if not isinstance(extensions, list):
            raise SpecError("extensions is not a list")
        return cls(
            program=Program(kind=_text(program.get("kind"), "program kind"),
                            target=_text(program.get("target"), "program target"),
                            args=_texts(program.get("args", []), "program args")),
            capture=_text(data.get("capture"), "capture"),
            command=tuple(_texts(data.get("command", []), "command")),
            keep_caches=_flag(data.get("keep_caches", False), "keep_caches"),
            profile=_flag(data.get("profile", False), "profile"),
            force_eager=_flag(data.get("force_eager", False), "force_eager"),
            workdir=_optional_text(data.get("workdir"), "workdir"),
            cache_dir=_optional_text(data.get("cache_dir"), "cache_dir"),
            sigint_notes_fd=_optional_fd(data.get("sigint_notes_fd")),
            extensions=tuple(ChildExtension(module=check_extension_name(_object(e, "extension").get("module")),
                                            payload=_text(_object(e, "extension").get("payload", "{}"),
                                                          "extension payload"))
                             for e in extensions),
        )


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(f"{what} is not an object")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise SpecError(f"{what} is not text")
    return value


def _optional_text(value: Any, what: str) -> str | None:
    return None if value is None else _text(value, what)


def _texts(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{what} is not a list of text")
    return list(value)


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{what} is not true or false")
    return value


def _optional_fd(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SpecError("sigint_notes_fd is not a file descriptor")
    return value
