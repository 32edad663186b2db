"""The ``dynscope`` command line: one module per subcommand, one error policy for all.

Each subcommand module defines a ``Command`` with ``name``, ``help``, ``prepare_parser``
and ``run``. Views are imported inside ``run``, so ``dynscope summary`` never imports
Textual and nothing but ``explain`` imports torch. Errors meant for people
(DynscopeError) become one line on stderr; a bug in dynscope becomes one line too,
with the traceback only under DYNSCOPE_DEBUG=1.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable
from typing import Protocol

from dynscope._version import __version__
from dynscope.errors import DynscopeError

SUBCOMMANDS = (
    "explain", "summary", "stages", "show", "diff", "graph", "tui", "report", "check", "compare", "minify", "fix", "import", "timeline",
    "mcp", "share", "numerics",
)

INTERNAL_ERROR_EXIT = 70


class Command(Protocol):
    """What each subcommand module's ``Command`` is (explain adds ``run_argv``)."""

    help: str

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int | None: ...


def _load(name: str) -> Command:
    command: Command = importlib.import_module(f"dynscope.commands.{name}").Command()
    return command


def build_parser(only: str | None = None) -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """The whole command line, or (``only``: a subcommand's name) the one subcommand it runs:
    a command's module imports what its parser needs, and a command should not pay for all
    the others' at start-up (every parser imports 25 of dynscope's modules, ``summary``'s 5)."""
    parser = argparse.ArgumentParser(
        prog="dynscope",
        description="See what torch.compile did to your program, and why.",
    )
    parser.add_argument("--version", action="version", version=f"dynscope {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = {}
    for name in SUBCOMMANDS if only is None else (only,):
        try:
            command = _load(name)
        except ModuleNotFoundError as e:
            if e.name != f"dynscope.commands.{name}":
                raise
            continue
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        command.prepare_parser(sub)
        commands[name] = command
    return parser, commands


# pyproject's dependencies by import name (torch aside: only `explain` needs it, and says so).
# Each subcommand imports only what it uses (textual: the TUI; jinja2: the HTML report), so a
# missing one is reported by the command that needs it; rich prints every command's output and
# error, so it is checked first.
_DEPENDENCIES = ("rich", "networkx", "textual", "jinja2")


def _not_installed(name: str) -> str:
    return f"the package {name!r} is not installed: install dynscope first (`pip install -e .` in its checkout)"


def main(argv: list[str] | None = None) -> int:
    import importlib.util

    if importlib.util.find_spec("rich") is None:
        print(f"dynscope: {_not_installed('rich')}", file=sys.stderr)
        return 1
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, commands = build_parser(argv[0] if argv and argv[0] in SUBCOMMANDS else None)
    # explain hands everything after the program name to the program untouched, so it
    # parses its own arguments instead of going through argparse's subparser.
    if argv and argv[0] == "explain" and "explain" in commands:
        from dynscope.commands.explain import Command as Explain

        explain = commands["explain"]
        assert isinstance(explain, Explain)
        return _run(lambda: explain.run_argv(argv[1:], parser_for_help=parser))
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return _run(lambda: commands[args.command].run(args))


def _run(action: Callable[[], int | None]) -> int:
    from dynscope.stdout_guard import guarded_stdout

    try:
        with guarded_stdout():  # a failed write to stdout is one line and exit 2, not a bug
            return int(action() or 0)
    except DynscopeError as e:
        _error(str(e))
        return e.exit_code
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except BrokenPipeError:
        # `dynscope summary x | head`: the reader left; that is not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] not in _DEPENDENCIES:
            return _internal_error(e)
        _error(_not_installed((e.name or "").partition(".")[0]))
        return 1
    except Exception as e:  # a dynscope bug: say so in one line, keep the traceback opt-in
        return _internal_error(e)


def _internal_error(e: Exception) -> int:
    if os.environ.get("DYNSCOPE_DEBUG"):
        traceback.print_exc()
    _error(f"internal error: {type(e).__name__}: {e} (this is a dynscope bug; "
           "rerun with DYNSCOPE_DEBUG=1 for the traceback)")
    return INTERNAL_ERROR_EXIT


def _error(message: str) -> None:
    from dynscope.safe_text import one_line

    # Messages can quote a capture (a stage name, a path): one line, no control characters.
    print(f"dynscope: {one_line(message)}", file=sys.stderr)
