"""Argument helpers the subcommands share."""

from __future__ import annotations

import argparse
import os

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
