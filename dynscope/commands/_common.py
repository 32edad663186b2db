"""Argument helpers the subcommands share."""

from __future__ import annotations

import argparse
import os
from typing import Literal

from dynscope.errors import DynscopeError


def add_capture_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("capture", help="a .dynscope capture file")


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a view may read the source files a capture names (dynscope.analysis.source)."""
    parser.add_argument("--source-root", dest="source_roots", action="append", default=[], metavar="DIR",
                        help="also show source (.py) files under DIR (repeatable); by default only files "
                             "under the directory dynscope runs in are shown, never one the capture names")
    parser.add_argument("--any-source", action="store_true",
                        help="show every source file the capture names, wherever it is "
                             "(off by default: a capture must not decide what dynscope reads)")


def source_roots(args: argparse.Namespace) -> tuple[str, ...]:
    """The --source-root directories, each checked to be one."""
    import os

    for root in args.source_roots:
        if not os.path.isdir(root):
            raise DynscopeError(f"--source-root {root}: not a directory")
    return tuple(args.source_roots)


def add_compile_argument(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("--compile", dest="compile_id", metavar="ID", required=required,
                        help='compile id as torch prints it, e.g. "0/1"')


def add_program_arguments(parser: argparse.ArgumentParser) -> None:
    """SCRIPT [ARGS...] or -m MODULE [ARGS...], as python takes them (for commands that run a program)."""
    parser.add_argument("-m", dest="module_argv", nargs=argparse.REMAINDER, metavar="MODULE [ARGS]",
                        help="run a module as python -m does")
    parser.add_argument("program", nargs=argparse.REMAINDER, help="SCRIPT [ARGS...]")


def program_from_args(args: argparse.Namespace):
    """The Program the arguments of add_program_arguments name, or None when they name none."""
    from dynscope.runner.program import Program  # only commands that run a program need the runner

    if args.module_argv:
        return Program("module", args.module_argv[0], list(args.module_argv[1:]))
    if args.module_argv is not None:
        raise DynscopeError("-m needs a module name")
    if args.program:
        return Program("script", args.program[0], list(args.program[1:]))
    return None


def resolve_stage(capture, compile_id: str, name: str):
    """A stage by key ("post_grad.backward", "kernel:cpp_fused_0") or canonical name."""
    stages = capture.stages(compile_id)
    for stage in stages:
        if stage.key == name:
            return stage
    matches = [s for s in stages if s.name == name]
    if matches:
        return matches[0]
    if name.startswith("kernel:"):
        wanted = name.removeprefix("kernel:")
        kernels = [s for s in stages if s.name == "kernel" and s.key.removeprefix("kernel:").split(".backward")[0] == wanted]
        if kernels:
            return kernels[0]
    keys = {s.key for s in stages}
    why = ""
    if name in ("aot_joint", "aot_forward", "aot_backward") and "aot_inference" in keys:
        why = (" (no input needed gradients, e.g. it ran under torch.no_grad(), so AOTAutograd made one inference "
               "graph: aot_inference)")
    elif name == "aot_inference" and "aot_forward" in keys:
        why = " (it was compiled for training: AOTAutograd made aot_joint, aot_forward and aot_backward)"
    raise DynscopeError(f"compile {compile_id} has no stage {name!r}{why}; its stages: {', '.join(s.key for s in stages)}")



# Files that are part of a capture beside it (SQLite's write-ahead log and shared memory).
_CAPTURE_SIDE_FILES = ("", "-wal", "-shm", "-journal")


def refuse_overwriting_a_capture(output: str, inputs: list[str]) -> None:
    """Raise unless writing ``output`` (a report, a trace, a drawing) leaves every capture
    whole: not a capture being read (or its WAL), whatever its name, and not any other
    capture, told by its SQLite header rather than by its extension."""
    from dynscope.store.header import is_capture_file, is_sqlite_file

    for capture in inputs:
        for suffix in _CAPTURE_SIDE_FILES:
            if _same_file(output, capture + suffix):
                raise DynscopeError(f"refusing to write {output}: it is {'the capture' if not suffix else 'part of'} "
                                    f"{capture}, which this command reads; choose another output path")
    if is_capture_file(output):
        raise DynscopeError(f"refusing to overwrite {output}: it is a dynscope capture (by its SQLite header), "
                            "not an output of this command; choose another output path")
    if is_sqlite_file(output):
        raise DynscopeError(f"refusing to overwrite {output}: it is an SQLite database, not an output of this "
                            "command; choose another output path")


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):  # a WAL that is not there yet is still the capture's
        return True
    try:
        return os.path.samefile(a, b)  # a hard link to the capture is the capture
    except OSError:  # one of them does not exist
        return False


# --json [PATH] and --md [PATH], the same in every command: a path writes the document there, no
# path prints it on stdout.
STDOUT = "-"
# A value the option would take that is one of the command's inputs, not a document to write:
# `summary --json run.dynscope` means the capture, never "overwrite it with JSON"; `fix --json
# train.py` means the script.
InputKind = Literal["captures", "program"]


def _is_capture(path: str) -> bool:
    """An existing capture, told by its header whatever its name."""
    from dynscope.store.header import is_capture_file

    return os.path.isfile(path) and is_capture_file(path)


class _DocumentPath(argparse.Action):
    def __init__(self, *args, inputs: InputKind, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.inputs = inputs

    def _is_input(self, value: str) -> bool:
        if self.inputs == "program":
            return value.endswith(".py")
        return value.endswith(".dynscope") or _is_capture(value)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        value = STDOUT if values is None else str(values)
        if self._is_input(value):
            namespace.stray_inputs = [*getattr(namespace, "stray_inputs", []), value]
            value = STDOUT
        setattr(namespace, self.dest, value)


def add_document_options(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup, *, json_help: str,
                         md_help: str | None, inputs: InputKind, json_dest: str = "json") -> None:
    """``--json [PATH]`` (and ``--md [PATH]`` where the command has a Markdown form). ``inputs``: what the
    command reads (captures, or a program to run), which the flags never take for their path."""
    parser.add_argument("--json", dest=json_dest, nargs="?", action=_DocumentPath, inputs=inputs, default=None,
                        metavar="PATH", help=f"{json_help}: to PATH, or to stdout without one")
    if md_help is not None:
        parser.add_argument("--md", nargs="?", action=_DocumentPath, inputs=inputs, default=None, metavar="PATH",
                            help=f"{md_help}: to PATH, or to stdout without one")


def stray_inputs(args: argparse.Namespace) -> list[str]:
    """Inputs --json / --md took for their path (``summary --json run.dynscope``), in the order given."""
    return list(getattr(args, "stray_inputs", []))


def write_document(path: str, text: str, inputs: list[str]) -> None:
    """A --json / --md document: on stdout for STDOUT, else into ``path`` (never over a capture)."""
    import sys

    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    refuse_overwriting_a_capture(path, inputs)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise DynscopeError(f"cannot write {path}: {e.strerror}") from None
    print(f"dynscope: wrote {path}", file=sys.stderr)


def old_spelling(old: str, new: str) -> None:
    """One line on stderr for an option spelled as before (kept working for one release)."""
    import sys

    print(f"dynscope: {old} is now {new}; {old} keeps working until the next release", file=sys.stderr)


def refuse_program_as_document(args: argparse.Namespace) -> None:
    """`numerics --json train.py`: --json took the script for its path. Say so rather than run nothing."""
    stray = stray_inputs(args)
    if stray:
        raise DynscopeError(f"--json / --md took {stray[0]} for the document's path: give the path after it "
                            f"(--json out.json {stray[0]}), or - for stdout (--json - {stray[0]})")


def check_capture_output(path: str) -> None:
    """A capture that cannot be written there is said in one line before the program starts (and
    before any progress line): what is at the name (store.writer.check_capture_target), then a
    folder on a read-only file system or one this user may not write."""
    import errno

    from dynscope.store.writer import check_capture_target

    check_capture_target(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return  # no such folder: the writer says so, as before
    if read_only or not os.access(folder, os.W_OK):
        raise DynscopeError(f"cannot write capture {path}: {os.strerror(errno.EROFS if read_only else errno.EACCES)}")
