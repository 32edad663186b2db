"""dynscope explain: run a program as python would, record a capture, explain what torch.compile did."""

from __future__ import annotations

import argparse
import sys

from dynscope.errors import DynscopeError

USAGE = """dynscope explain [OPTIONS] SCRIPT [ARGS...]
       dynscope explain [OPTIONS] -m MODULE [ARGS...]"""

class Command:
    name = "explain"
    help = "run a script under instrumentation, record a capture and explain what torch.compile did"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.usage = USAGE
        _add_options(parser)
        parser.add_argument("program", nargs=argparse.REMAINDER, help="SCRIPT [ARGS...] or -m MODULE [ARGS...]")

    def run(self, args: argparse.Namespace) -> int:  # only reached via `dynscope explain` with no args
        raise DynscopeError("explain needs a script to run (dynscope explain SCRIPT [ARGS...])")

    def run_argv(self, argv: list[str], parser_for_help: argparse.ArgumentParser | None = None) -> int:
        options, program = _split(argv)
        parser = argparse.ArgumentParser(prog="dynscope explain", usage=USAGE, description=self.help)
        _add_options(parser)
        args = parser.parse_args(options)
        if program is None:
            raise DynscopeError("explain needs a script to run: dynscope explain SCRIPT [ARGS...] "
                                "or dynscope explain -m MODULE [ARGS...]")
        return explain(program, args, command=["dynscope", "explain", *argv])


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="PATH",
                        help="capture file to write (default: <script>-<time>.dynscope in the current directory)")
    parser.add_argument("--cold", action="store_true",
                        help="record every stage: Inductor's and AOTAutograd's caches off, in a fresh private cache "
                             "directory (removed after: your own caches are neither read nor written). By default "
                             "the caches are used as you have them, and a cache hit skips the stages it covers")
    parser.add_argument("--keep-caches", action="store_true",
                        help="accepted for old scripts: the caches are kept by default now")
    parser.add_argument("--warm", action="store_true",
                        help="run the program twice with the compile caches on, in a fresh cache directory: cold, "
                             "then warm (a fresh process); the warm run is the capture, the cold one is recorded "
                             "beside it (<capture>.cold.dynscope); shows what the warm start saved and what it "
                             "still compiled, and why")
    parser.add_argument("-q", "--quiet", action="store_true", help="print no progress and no summary (the capture is still written)")
    parser.add_argument("--all-ranks", action="store_true", help="under torchrun, every rank prints its summary")
    parser.add_argument("--html", metavar="PATH", help="also write an HTML report of the run")
    parser.add_argument("--tui", action="store_true", help="open the terminal UI on the capture after the run")
    parser.add_argument("--profile", action="store_true",
                        help="also time every compiled graph, graph break and torch.compile'd entry point, "
                             "so problems are ranked by what they cost")
    parser.add_argument("--vs-eager", action="store_true",
                        help="with --profile: run the program a second time with compilation off and report "
                             "the speed-up and when compiling paid for itself (implies --profile)")


def _split(argv: list[str]):
    """Separate dynscope's options from the program and its arguments (which are never parsed)."""
    # Options that take a value, so the parser knows where the program's own arguments begin (the
    # model reads the recorded command with the same set). From the contract, not the model: the
    # model's import is most of a launch's own start-up.
    from dynscope.events import EXPLAIN_VALUE_OPTIONS
    from dynscope.runner.program import Program

    options: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            rest = argv[i + 1 :]
            return options, (Program("script", rest[0], rest[1:]) if rest else None)
        if token == "-m" or (token.startswith("-m") and not token.startswith("--")):
            module = token[2:] or (argv[i + 1] if i + 1 < len(argv) else None)
            if not module:
                raise DynscopeError("-m needs a module name")
            rest = argv[i + 2 :] if token == "-m" else argv[i + 1 :]
            return options, Program("module", module, rest)
        if token.startswith("-"):
            options.append(token)
            if token in EXPLAIN_VALUE_OPTIONS and i + 1 < len(argv):
                options.append(argv[i + 1])
                i += 1
            i += 1
            continue
        return options, Program("script", token, argv[i + 1 :])
    return options, None


def explain(program, args: argparse.Namespace, *, command: list[str]) -> int:
    from dynscope.commands._common import check_capture_output
    from dynscope.runner.launcher import capture_path_for, exit_like, launch, rank_from_env
    from dynscope.runner.program import check_runnable
    from dynscope.runner.spec import ChildSpec

    rank, world = rank_from_env()
    path = capture_path_for(program, args.output, rank=rank, world_size=world)
    profile = args.profile or args.vs_eager
    if args.cold and (args.warm or args.keep_caches):
        raise DynscopeError(f"--cold turns the caches off; it cannot go with {'--warm' if args.warm else '--keep-caches'}")
    if args.keep_caches and rank in (None, 0):
        print("dynscope: --keep-caches is the default now (--cold records every stage with the caches off)",
              file=sys.stderr)
    check_runnable(program)  # a script that cannot run is said in one line, before any progress
    check_capture_output(path)
    with _progress(program, path, args, rank):
        if args.warm:
            from dynscope.runner.warm_start import record_warm_start

            result = record_warm_start(program, path, command=tuple(command), profile=profile,
                                       announce=rank in (None, 0) and not args.quiet)
        elif args.cold:
            from dynscope.runner.cache_dirs import private_cache_dir

            with private_cache_dir("cold") as cache_dir:
                result = launch(ChildSpec(program, path, tuple(command), keep_caches=False, profile=profile,
                                          cache_dir=cache_dir))
        else:
            result = launch(ChildSpec(program, path, tuple(command), keep_caches=True, profile=profile))
    if not result.capture_written:
        print("dynscope: no capture was written: the program ended before recording started", file=sys.stderr)
        return exit_like(result.returncode)
    speaks = rank in (None, 0) or args.all_ranks
    if args.vs_eager:
        from dynscope.runner.eager_twin import record_eager_twin

        if speaks:
            print("dynscope: running the program again with compilation off (--vs-eager)...", file=sys.stderr)
        record_eager_twin(program, path, command=command)
    try:
        if speaks and not args.quiet:
            _print_summary(path)
        if args.html:
            from dynscope.commands.report import write_report

            write_report([path], args.html, fmt="html")
            if speaks:
                print(f"dynscope: wrote {args.html}", file=sys.stderr)
        if args.tui and speaks:
            from dynscope.commands.tui import open_tui

            open_tui(path)
    except DynscopeError as e:
        from dynscope.safe_text import one_line

        print(f"dynscope: {one_line(str(e))}", file=sys.stderr)
    return exit_like(result.returncode)


def _progress(program, path: str, args: argparse.Namespace, rank: int | None):
    """The live status while the program runs (-q: none; under torchrun rank 0 alone, a line per phase)."""
    from dynscope.commands._progress import Progress
    from dynscope.runner.live_counts import CaptureCounter

    progress = Progress("explain", quiet=args.quiet or rank not in (None, 0), counts=CaptureCounter(path).read,
                        live=False if rank is not None else None)
    progress.stage(f"running {program.display}" + (" cold, then warm" if args.warm else ""))
    return progress


def _print_summary(path: str) -> None:
    from dynscope.model import Capture
    from dynscope.reporters import prepare_report

    with Capture.open(path) as capture:
        prepare_report("terminal", [capture]).render(sys.stderr)
