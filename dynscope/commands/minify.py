"""dynscope minify: find the failing layer and op of a torch.compile failure, and write a
small standalone repro.py that fails the same way.

    dynscope minify [OPTIONS] SCRIPT [ARGS...]
    dynscope minify [OPTIONS] -m MODULE [ARGS...]
    dynscope minify --from CAPTURE --compile ID [OPTIONS]
    dynscope minify --from CAPTURE --suspect [OPTIONS]

Everything after SCRIPT (or -m MODULE) belongs to the program. Progress goes to stderr;
the result also goes to OUT/result.json and into the capture.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from dynscope.commands._common import add_program_arguments, program_from_args
from dynscope.errors import DynscopeError

if TYPE_CHECKING:
    pass

USAGE = """dynscope minify [OPTIONS] SCRIPT [ARGS...]
       dynscope minify [OPTIONS] -m MODULE [ARGS...]
       dynscope minify --from CAPTURE --compile ID [OPTIONS]
       dynscope minify --from CAPTURE --suspect [OPTIONS]"""

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_RTOL = DEFAULT_ATOL = 1e-3  # torch's own accuracy minifier uses 1e-3 too


class Command:
    name = "minify"
    help = ("find which layer of torch.compile breaks a program (and which op), and write a minimal "
            "standalone repro.py that fails the same way")

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.usage = USAGE
        parser.add_argument("--accuracy", action="store_true",
                            help="also treat wrong results as failures: compare compiled code with eager "
                                 "(outputs and gradients) against a float64 reference")
        parser.add_argument("--rtol", type=float, default=None, help="relative tolerance for --accuracy (1e-3)")
        parser.add_argument("--atol", type=float, default=None, help="absolute tolerance for --accuracy (1e-3)")
        parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                            help="limit for each check, and for each compile or compiled call of the program "
                                 f"(default {DEFAULT_TIMEOUT_S:.0f}); one that runs longer counts as a hang")
        parser.add_argument("--out", metavar="DIR",
                            help="where repro.py and the run's files go (default: <program>-minify)")
        parser.add_argument("--resume", action="store_true",
                            help="continue an interrupted run in the same --out directory, reusing its checks")
        parser.add_argument("--from", dest="capture", metavar="CAPTURE",
                            help="minify a compile recorded in a capture instead of running a program")
        parser.add_argument("--compile", dest="compile_id", metavar="ID", help='with --from: the compile, e.g. "0/0"')
        parser.add_argument("--suspect", action="store_true",
                            help="with --from: start from the first suspect `dynscope numerics` recorded in the "
                                 "capture (its compile, the subgraph ending at that node) with --accuracy, "
                                 "instead of bisecting the whole graph")
        parser.add_argument("--backend", default="inductor",
                            help="with --from: the backend that fails (a capture does not record it; default inductor)")
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr (the result is still printed)")
        add_program_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        options = _options(args)
        from dynscope.commands._progress import Progress
        from dynscope.minifier import session
        from dynscope.runner.live_counts import NewestCapture
        from dynscope.safe_console import safe_console

        console = safe_console(stderr=True, highlight=False)
        # the counts: of the program's run (its capture in the output directory), while it runs
        with Progress("minify", quiet=args.quiet, counts=NewestCapture(options.out_dir).read,
                      counts_of="program run") as progress:
            outcome = session.run(options, progress)
        print_outcome(console, outcome)
        return 0 if outcome.verified else 1


def _options(args: argparse.Namespace):
    from dynscope.minifier.session import Options
    from dynscope.runner.program import check_runnable

    if args.timeout <= 0:
        raise DynscopeError("--timeout must be a positive number of seconds")
    accuracy = None
    if args.accuracy or args.rtol is not None or args.atol is not None:
        accuracy = {"rtol": DEFAULT_RTOL if args.rtol is None else args.rtol,
                    "atol": DEFAULT_ATOL if args.atol is None else args.atol}
    program = program_from_args(args)
    suspect = None
    if args.suspect:
        if args.capture is None:
            raise DynscopeError("--suspect goes with --from CAPTURE (a capture checked by dynscope numerics)")
        if not os.path.exists(args.capture):
            raise DynscopeError(f"no such capture: {args.capture}")
        from dynscope.minifier.suspect import first_suspect

        suspect = first_suspect(args.capture)
        if args.compile_id and args.compile_id != suspect.compile_id:
            raise DynscopeError(f"the first suspect is in compile {suspect.compile_id}, not {args.compile_id}: "
                                "leave out --compile with --suspect")
        args.compile_id = suspect.compile_id
        # a numerics suspect is a wrong result, not a crash: compare with eager against float64
        accuracy = accuracy or {"rtol": DEFAULT_RTOL, "atol": DEFAULT_ATOL}
    if args.capture is not None:
        if program is not None:
            raise DynscopeError("give either a program to run or --from CAPTURE, not both")
        if not args.compile_id:
            raise DynscopeError("--from CAPTURE needs --compile ID (dynscope summary CAPTURE lists the compiles)")
        if not os.path.exists(args.capture):
            raise DynscopeError(f"no such capture: {args.capture}")
        stem = os.path.splitext(os.path.basename(args.capture))[0]
        out = args.out or f"{stem}-minify-{args.compile_id.replace('/', '_')}"
    else:
        if program is None:
            raise DynscopeError("minify needs a program to run (dynscope minify SCRIPT [ARGS...]) "
                                "or a capture (dynscope minify --from CAPTURE --compile ID)")
        if args.compile_id:
            raise DynscopeError("--compile goes with --from CAPTURE")
        check_runnable(program)
        stem = os.path.splitext(os.path.basename(program.target.rstrip("/")))[0] or "program"
        out = args.out or f"{stem}-minify"
    return Options(out_dir=out, timeout=args.timeout, accuracy=accuracy, program=program, capture=args.capture,
                   compile_id=args.compile_id, backend=args.backend, resume=args.resume, suspect=suspect,
                   command=["dynscope", "minify", *sys.argv[2:]])


def print_outcome(console, outcome) -> None:
    from rich.markup import escape

    where = escape(f"compile {outcome.compile_id}") if outcome.compile_id else "the failing graph"
    if outcome.verified:
        console.print(f"[bold]dynscope:[/] minified {where} in {outcome.wall_s:.1f} s "
                      f"({outcome.checks_run} checks)", soft_wrap=True)
    else:
        console.print(f"[bold]dynscope:[/] {where}: no verified repro ({outcome.wall_s:.1f} s, "
                      f"{outcome.checks_run} checks)", soft_wrap=True)
    rows = [("failure", outcome.signature)]
    if outcome.culprit:
        passed = f" (passes with {', '.join(outcome.passed_backends)})" if outcome.passed_backends and outcome.culprit_backend else ""
        rows.append(("culprit", f"{outcome.culprit}{passed}"))
    elif outcome.passed_backends:
        rows.append(("culprit", f"not found: {', '.join(outcome.passed_backends)} all pass"))
    if outcome.op:
        rows.append(("op", outcome.op))
    if outcome.attribution and outcome.culprit_backend:
        rows.append(("traceback", outcome.attribution))
    if outcome.nodes_after is not None:
        rows.append(("graph", f"{outcome.nodes_before} → {outcome.nodes_after} compute nodes"))
    if outcome.repro:
        status = ("verified: fails the same way in a fresh process" if outcome.verified
                  else f"NOT verified: in a fresh process {outcome.verify}")
        rows.append(("repro", f"{outcome.repro} ({status})"))
        rows.append(("run", f"python {outcome.repro}"))
    for note in outcome.notes:
        rows.append(("note", note))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        if value:
            console.print(f"  [bold]{key.ljust(width)}[/]  {escape(str(value))}", soft_wrap=True)
