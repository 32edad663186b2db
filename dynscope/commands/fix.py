"""dynscope fix: try remedies for a program's graph breaks, recompiles and errors, each in a fresh
run, and report the ones its run proved (problem gone, outputs equal).

    dynscope fix [OPTIONS] SCRIPT [ARGS...]
    dynscope fix [OPTIONS] -m MODULE [ARGS...]
    dynscope fix --from CAPTURE [OPTIONS]

Progress goes to stderr, then the table; ``-o`` writes the JSON document (dynscope.fix/1),
``--md`` a Markdown comment. The user's files are never edited.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from dynscope.commands._common import add_program_arguments, program_from_args
from dynscope.errors import DynscopeError

USAGE = """dynscope fix [OPTIONS] SCRIPT [ARGS...]
       dynscope fix [OPTIONS] -m MODULE [ARGS...]
       dynscope fix --from CAPTURE [OPTIONS]"""

DEFAULT_BUDGET_S = 1800.0
DEFAULT_RTOL = DEFAULT_ATOL = 1e-5


class Command:
    name = "fix"
    help = ("try the remedies for a program's graph breaks, recompiles and errors in fresh runs, "
            "and report the ones that are proven (problem gone, outputs equal)")

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.usage = USAGE
        parser.add_argument("-o", "--output", metavar="PATH", help="write the result as JSON (schema dynscope.fix/1)")
        parser.add_argument("--md", metavar="PATH", help="write the result as Markdown (for an issue or PR comment)")
        parser.add_argument("--from", dest="capture", metavar="CAPTURE",
                            help="take the problems from a recorded run and re-run the command it recorded")
        parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                            help=f"the whole fix's time limit: a trial that cannot finish in it is not started, one still "
                                 f"running then is stopped (default {DEFAULT_BUDGET_S:.0f})")
        parser.add_argument("--only", choices=("break", "recompile", "error"), help="only this kind of problem")
        parser.add_argument("--jobs", type=int, default=None, metavar="N",
                            help="trials run at the same time (default: the number of CPU cores)")
        parser.add_argument("--rtol", type=float, default=DEFAULT_RTOL,
                            help=f"relative tolerance when comparing outputs (default {DEFAULT_RTOL:g})")
        parser.add_argument("--atol", type=float, default=DEFAULT_ATOL,
                            help=f"absolute tolerance when comparing outputs (default {DEFAULT_ATOL:g})")
        parser.add_argument("--profile", action="store_true",
                            help="measure each run's time as `explain --profile` does (costs a little per run); "
                                 "without it, run time is the run's wall time less compile time")
        parser.add_argument("--ignore-stdout", action="store_true",
                            help="do not require the program to print the same as the first run (it prints "
                                 "timings or dates); outputs and exit status are still compared")
        parser.add_argument("--try", dest="tries", action="append", default=[], metavar="NAME=VALUE",
                            help="also try this setting (e.g. torch._dynamo.config.specialize_int=True); repeatable")
        parser.add_argument("--out", metavar="DIR", help="where the runs' captures and output go (default: <program>-fix)")
        add_program_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.fix import session
        from dynscope.safe_text import safe_console

        from dynscope.commands.minify import LiveProgress

        options = _options(args)
        console = safe_console(stderr=True, highlight=False)
        # On a terminal one live line (spinner, elapsed time) and a ✓ per finished step; in a log, one line each.
        with LiveProgress(console) as progress:
            doc = session.run(options, progress.stage)
        from dynscope.reporters.fix_table import render_fix

        render_fix(doc, console)
        if args.output:
            _write(args.output, json.dumps(doc, indent=2) + "\n")
            console.print(f"dynscope: wrote {args.output}", markup=False)
        if args.md:
            from dynscope.reporters.markdown import render_fix_markdown

            _write(args.md, render_fix_markdown(doc))
            console.print(f"dynscope: wrote {args.md}", markup=False)
        return 0


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise DynscopeError(f"cannot write {path}: {e.strerror}") from None


def _options(args: argparse.Namespace):
    from dynscope.analysis.remedies import parse_try
    from dynscope.fix.session import Options
    from dynscope.runner.program import check_runnable

    if args.budget <= 0:
        raise DynscopeError("--budget must be a positive number of seconds")
    if args.jobs is not None and args.jobs < 1:
        raise DynscopeError("--jobs must be 1 or more")
    if args.rtol < 0 or args.atol < 0:
        raise DynscopeError("--rtol and --atol must not be negative")
    try:
        tries = [parse_try(t) for t in args.tries]
    except ValueError as e:
        raise DynscopeError(str(e)) from None
    program, cwd = program_from_args(args), None
    if args.capture is not None:
        if program is not None:
            raise DynscopeError("give either a program to run or --from CAPTURE, not both")
        program, cwd = _recorded_program(args.capture)
    if program is None:
        raise DynscopeError("fix needs a program to run (dynscope fix SCRIPT [ARGS...]) "
                            "or a capture (dynscope fix --from CAPTURE)")
    check_runnable(program)
    stem = os.path.splitext(os.path.basename((args.capture or program.target).rstrip("/")))[0] or "program"
    return Options(program=program, out_dir=os.path.abspath(args.out or f"{stem}-fix"), budget_s=args.budget,
                   jobs=args.jobs or os.cpu_count() or 1, rtol=args.rtol, atol=args.atol, only=args.only,
                   from_capture=args.capture and os.path.abspath(args.capture), tries=tries, cwd=cwd,
                   check_stdout=not args.ignore_stdout, profile=args.profile)


def _recorded_program(path: str):
    """The program a capture recorded (``dynscope explain ... train.py --epochs 1``), to run again
    where it ran (a missing directory: here)."""
    from dynscope.model import Capture
    from dynscope.runner.program import Program

    if not os.path.exists(path):
        raise DynscopeError(f"no such capture: {path}")
    with Capture.open(path) as capture:
        argv = capture.run.program_command
        cwd = capture.run.cwd
    where = cwd if cwd and os.path.isdir(cwd) else None
    if not argv or argv[0] in ("dynscope", sys.executable):
        raise DynscopeError(f"{path} does not record the command of a program dynscope can run again")
    if argv[0] == "-m" or (argv[0].startswith("-m") and len(argv[0]) > 2):
        module = argv[1] if argv[0] == "-m" else argv[0][2:]
        rest = argv[2:] if argv[0] == "-m" else argv[1:]
        return Program("module", module, rest), where
    target = argv[0] if os.path.isabs(argv[0]) or not cwd else os.path.join(cwd, argv[0])
    return Program("script", target, argv[1:]), where
