"""dynscope fix: try remedies for a program's graph breaks, recompiles and errors, each in a fresh
run, and report the ones its run proved (problem gone, outputs equal).

    dynscope fix [OPTIONS] SCRIPT [ARGS...]
    dynscope fix [OPTIONS] -m MODULE [ARGS...]
    dynscope fix --from CAPTURE [OPTIONS]

Progress goes to stderr, then the table; ``-o`` writes the JSON document (dynscope.fix/2),
``--md`` a Markdown comment, ``--diff`` the verified source rewrites as a diff. The user's files
are never edited, except with ``--apply`` (the verified rewrites of the program's own files, each
original kept as FILE.orig).

``--from`` re-runs the command a capture recorded, and a capture can come from anyone: the exact
command and directory are shown first and run only when the user says so (y on a terminal, or
``--yes``); with no terminal to ask on and no ``--yes`` it is refused (exit 2). Every run reads
stdin from /dev/null and runs in a scratch copy of the working directory (dynscope/fix/scratch.py).
SIGTERM, SIGHUP and SIGINT end every run it started, then it exits with 128 + the signal's number.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import stat
import sys
import time
from typing import TYPE_CHECKING

from dynscope.commands._common import (
    STDOUT,
    add_document_options,
    add_program_arguments,
    old_spelling,
    program_from_args,
    refuse_program_as_document,
)
from dynscope.errors import DynscopeError

if TYPE_CHECKING:
    from rich.console import Console

    from dynscope.analysis.fix_document import FixDocument
    from dynscope.analysis.remedies import Remedy

USAGE = """dynscope fix [OPTIONS] SCRIPT [ARGS...]
       dynscope fix [OPTIONS] -m MODULE [ARGS...]
       dynscope fix --from CAPTURE [OPTIONS]"""

DEFAULT_BUDGET_S = 1800.0
DEFAULT_RTOL = DEFAULT_ATOL = 1e-5
MAX_SHOWN_COMMAND = 8192  # characters: a recorded command longer than this, escaped, is not shown or run
MAX_RECORDED_SCRIPT = 16 << 20  # bytes: a recorded "script" larger than this is not read (nor compiled) to check it


class Command:
    name = "fix"
    help = ("try the remedies for a program's graph breaks, recompiles and errors in fresh runs, "
            "and report the ones that are proven (problem gone, outputs equal)")

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.usage = USAGE
        add_document_options(parser, inputs="program", json_dest="output", json_help="the result as JSON (schema dynscope.fix/2)",
                             md_help="the result as Markdown (for an issue or PR comment)")
        parser.add_argument("-o", "--output", dest="old_output", metavar="PATH",
                            help="the old spelling of --json PATH (until the next release)")
        parser.add_argument("--from", dest="capture", metavar="CAPTURE",
                            help="take the problems from a recorded run and re-run the command it recorded "
                                 "(shown first; asks before running it)")
        parser.add_argument("--yes", action="store_true",
                            help="with --from: run the recorded command without asking (it is still shown); "
                                 "needed where there is no terminal to ask on")
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
        parser.add_argument("--patch", dest="patches", action="append", default=[], metavar="FILE",
                            help="judge this unified diff (git diff, an agent's change) instead of trying the remedies: "
                                 "it runs from memory, never applied to a file; exit 0 when it fixed or improved "
                                 "the run with the same outputs, 1 otherwise; repeatable (each judged alone)")
        parser.add_argument("--diff", metavar="FILE",
                            help="write the verified source rewrites (those of the combined run) as one unified diff "
                                 "(- for stdout) that `git apply` takes from the repository's root (or from here "
                                 "outside a repository); changes to an installed library go to "
                                 "<package>-<version>.diff next to it")
        parser.add_argument("--apply", action="store_true",
                            help="write the verified source rewrites into the program's own files (shown first; each "
                                 "file kept as FILE.orig); never into an installed package")
        parser.add_argument("--out", metavar="DIR", help="where the runs' captures and output go (default: a new "
                                                         "<program>-fix-<date>-<time> directory per run)")
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr (the result is still printed)")
        add_program_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        from dataclasses import replace

        from dynscope.commands._progress import Progress
        from dynscope.fix import outdir, session, write_changes
        from dynscope.fix.baseline_check import BaselineFailed
        from dynscope.fix.messages import Phase
        from dynscope.fix.stopping import Stopped, signals_stop_the_run
        from dynscope.safe_console import safe_console

        options = _options(args)
        if args.capture is not None:
            confirm_recorded(args.capture, options.program, options.cwd, yes=args.yes)
        # Read only now: with --from, the files a patch changes are in the directory the capture names.
        # Reading and applying the patches is a part of --budget: the runs get what is left.
        started = time.time()
        patches = [_patch(path, options.cwd or os.getcwd(), started + options.budget_s) for path in args.patches]
        if patches:  # to a tenth of a second, so that messages name the --budget given when reading took no time
            options = replace(options, patches=patches,
                              budget_s=max(0.1, round(options.budget_s - (time.time() - started), 1)))
        out = outdir.claim(args.out, _stem(args.capture or options.program.target))
        options = replace(options, out_dir=out.path)
        console = safe_console(stderr=True, highlight=False)
        try:
            # On a terminal one live line (the step, run i/N, what the run in progress compiled so far, elapsed)
            # and a ✓ per finished step; in a log, one line per step at most every few seconds.
            from dynscope.runner.live_counts import NewestCapture

            with signals_stop_the_run(), Progress("fix", quiet=args.quiet, counts=NewestCapture(out.path).read,
                                                    counts_of="latest run") as progress:
                doc = session.run(options, lambda text: (progress.stage if isinstance(text, Phase) else progress.note)(text))
        except BaselineFailed as failed:  # the program's own last words first, then what it means
            _say_program_lines(console, failed.last_lines)
            raise
        except Stopped as stopped:
            raise DynscopeError(f"fix stopped by {stopped.name}: every run it started has ended "
                                f"(their output so far: {out.path})", exit_code=stopped.exit_code) from None
        finally:
            out.release()
        from dynscope.reporters.fix_table import render_fix

        # The change is named from where the user stands (the repository's root, else here): `git apply` takes it.
        doc = write_changes.rebased(doc, write_changes.diff_base(os.getcwd()))

        render_fix(doc, console)
        if args.output:
            _write(args.output, json.dumps(doc.to_json(), indent=2) + "\n")
            if args.output != STDOUT:
                console.print(f"dynscope: wrote {args.output}", markup=False)
        if args.md:
            from dynscope.reporters.markdown import render_fix_markdown

            _write(args.md, render_fix_markdown(doc))
            if args.md != STDOUT:
                console.print(f"dynscope: wrote {args.md}", markup=False)
        if args.diff or args.apply:
            _write_changes(doc, args, console, session.program_tree(options))
        if options.patches:  # the judge of a patch: did every one fix or improve the run?
            judged = [row for row in doc.trials if row.applies_as == "source"]
            return 0 if judged and all(row.verdict in ("fixed", "improved") for row in judged) else 1
        return 0


def _write_changes(doc: FixDocument, args: argparse.Namespace, console: Console, root: str) -> None:
    """--diff and --apply: the source rewrites the combined run verified, and nothing else
    (``root``: the program's tree, the only place --apply writes)."""
    from dynscope.fix import write_changes

    combined = doc.combined
    if combined is None or not combined.edits:
        console.print("dynscope: no verified source change: nothing written for --diff/--apply", markup=False)
        return
    if not combined.verified:
        console.print(f"dynscope: the combined change was not verified ({combined.verdict}: {combined.why}): "
                      "nothing written for --diff/--apply", markup=False)
        return
    for note in combined.conflicts:
        console.print(f"dynscope: {note}", markup=False)
    if args.diff:
        files = write_changes.diff_files(args.diff, combined.edits)
        write_changes.write_diffs(files)
        for f in files:
            where = "the diff to stdout" if f.path == write_changes.STDOUT else f.path
            console.print(f"dynscope: wrote {where} ({f.what})", markup=False)
    for line in combined.settings:  # a setting is no diff: say it where the diff is written
        console.print(f"dynscope: the rewrites need this setting too (before torch.compile): {line}", markup=False)
    if args.apply:
        mine, left = write_changes.applicable(combined.edits, root)
        for line in left:
            console.print(f"dynscope: --apply leaves {line}", markup=False)
        if mine:
            console.print("dynscope: --apply writes this change:", markup=False)
            console.print("".join(e.diff() for e in mine), markup=False, highlight=False, soft_wrap=True)
            written = write_changes.apply_edits(mine)
            console.print(f"dynscope: changed {', '.join(written)} (originals kept as *.orig)", markup=False)


def _say_program_lines(console: Console, lines: tuple[str, ...]) -> None:
    from rich.text import Text

    from dynscope.safe_text import one_line

    if lines:
        console.print("dynscope: the program's stderr ended with:", markup=False, highlight=False)
    for line in lines:
        console.print(Text("  " + one_line(line)), soft_wrap=True, highlight=False)


def _check_output(option: str, path: str | None, capture: str | None) -> None:
    """-o and --md never replace a capture: the one fix reads (--from) or any other."""
    from dynscope.store.header import is_capture_file

    if path is None or not os.path.exists(path):
        return
    if capture is not None and os.path.exists(capture) and os.path.samefile(path, capture) or \
            os.path.isfile(path) and is_capture_file(path):
        raise DynscopeError(f"{option} {path}: that is a dynscope capture; refusing to overwrite it "
                            "(give the output another name)")


def _write(path: str, text: str) -> None:
    if path == STDOUT:  # --json / --md without a path
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    _check_output("output", path, None)  # made since the start (a run's capture under that name)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise DynscopeError(f"cannot write {path}: {e.strerror}") from None


def _options(args: argparse.Namespace):
    from dynscope.analysis.remedies import parse_try
    from dynscope.fix.session import Options
    from dynscope.runner.program import check_runnable

    refuse_program_as_document(args)
    if args.old_output is not None:
        _check_output("-o", args.old_output, args.capture)  # first: a refusal stays one line
        old_spelling("fix -o PATH", "fix --json PATH")
        args.output = args.old_output
    if not args.budget > 0:  # NaN too
        raise DynscopeError("--budget must be a positive number of seconds")
    if args.jobs is not None and args.jobs < 1:
        raise DynscopeError("--jobs must be 1 or more")
    if not (args.rtol >= 0 and args.atol >= 0):  # NaN too: it would compare unequal to everything
        raise DynscopeError("--rtol and --atol must be numbers, not negative")
    if args.yes and args.capture is None:
        raise DynscopeError("--yes goes with --from CAPTURE (it answers the question before a recorded command runs)")
    try:
        tries = [parse_try(t) for t in args.tries]
    except ValueError as e:
        raise DynscopeError(str(e)) from None
    program, cwd = program_from_args(args), None
    if args.capture is not None:
        if program is not None:
            raise DynscopeError("give either a program to run or --from CAPTURE, not both")
        program, cwd = recorded_program(args.capture)
    if program is None:
        raise DynscopeError("fix needs a program to run (dynscope fix SCRIPT [ARGS...]) "
                            "or a capture (dynscope fix --from CAPTURE)")
    check_runnable(program)
    if args.out is not None and os.path.realpath(args.out) == os.path.realpath(cwd or os.getcwd()):
        raise DynscopeError(f"--out {args.out} is the program's working directory: give the runs' output a "
                            "directory of its own (each run works in a copy of the working directory)")
    if args.patches and (args.diff or args.apply):
        raise DynscopeError("--diff and --apply write fix's own verified rewrites; a --patch is yours already")
    for option, path in (("--json", args.output), ("--md", args.md), ("--diff", args.diff)):
        if path != STDOUT:
            _check_output(option, path, args.capture)

    return Options(program=program, out_dir="", budget_s=args.budget,
                   jobs=args.jobs or os.cpu_count() or 1, rtol=args.rtol, atol=args.atol, only=args.only,
                   from_capture=args.capture and os.path.abspath(args.capture), tries=tries, cwd=cwd,
                   check_stdout=not args.ignore_stdout, profile=args.profile)


def _patch(path: str, root: str, deadline: float) -> Remedy:
    """A --patch file read and applied in memory to the files under the program's working
    directory (paths as `git apply` run there takes them) or of an installed library (paths from the
    package on); refused in one line when it does not apply."""
    from dynscope.analysis.remedies import patch_remedy
    from dynscope.fix import unified_diff
    from dynscope.fix.patch_targets import check_targets
    from dynscope.fix.source_reader import library_dirs

    text, name = unified_diff.read_patch(path)
    # a file of an installed library is named from its package on (``transformers/...``), as --diff writes it
    libraries = library_dirs()
    changed = unified_diff.apply(unified_diff.parse(text, name), root, name, libraries, deadline)
    # torch's and dynscope's own code, .pth and start-up files: refused, never judged as if they had run
    check_targets(((c.path, c.relative) for c in changed), name, libraries)
    return patch_remedy(name, text, [(c.path, c.new) for c in changed])


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path.rstrip("/")))[0] or "program"


def recorded_program(path: str):
    """The program a capture recorded (``dynscope explain ... train.py --epochs 1``) and the
    directory it ran in, checked before anything is shown or run: text without NUL, an existing
    absolute directory, a script that is a regular file (or a directory: its __main__.py)."""
    from dynscope.model import Capture
    from dynscope.runner.program import Program

    if not os.path.exists(path):
        raise DynscopeError(f"no such capture: {path}")
    with Capture.open(path) as capture:
        argv = list(capture.run.program_command)
        cwd = capture.run.cwd
    if not argv or argv[0] in ("dynscope", sys.executable):
        raise DynscopeError(f"{path} does not record the command of a program dynscope can run again")
    if any("\0" in a for a in argv) or (cwd and "\0" in cwd):
        raise DynscopeError(f"{path} records a command or directory holding a NUL character: not a command to run")
    if not cwd or not os.path.isabs(cwd):
        raise DynscopeError(f"{path} records no absolute working directory for its command: run the program "
                            "yourself with dynscope fix SCRIPT [ARGS...]")
    if not os.path.isdir(cwd):
        raise DynscopeError(f"{path} records the working directory {cwd}, which does not exist here: run the "
                            "program yourself with dynscope fix SCRIPT [ARGS...]")
    if argv[0] == "-m" or (argv[0].startswith("-m") and len(argv[0]) > 2):
        module = (argv[1] if len(argv) > 1 else "") if argv[0] == "-m" else argv[0][2:]
        if not module or module.startswith("-"):
            raise DynscopeError(f"{path} records -m with no module name")
        rest = argv[2:] if argv[0] == "-m" else argv[1:]
        return Program("module", module, rest), cwd
    if argv[0].startswith("-"):
        raise DynscopeError(f"{path} records a command starting with the option {argv[0]}: only a script or "
                            "-m MODULE is run again")
    target = os.path.join(cwd, argv[0])
    try:
        mode = os.stat(target).st_mode  # never opened here unless it is a file: a FIFO would block
    except OSError as e:
        raise DynscopeError(f"cannot run {target} (the script {path} records): {e.strerror}") from None
    if stat.S_ISDIR(mode):  # python runs its __main__.py, which check_runnable reads
        try:
            mode = os.stat(os.path.join(target, "__main__.py")).st_mode
        except OSError:
            mode = stat.S_IFREG  # check_runnable says what is missing
    if not stat.S_ISREG(mode):
        raise DynscopeError(f"cannot run {target} (the script {path} records): not a regular file")
    if os.path.isfile(target) and os.path.getsize(target) > MAX_RECORDED_SCRIPT:
        raise DynscopeError(f"cannot run {target} (the script {path} records): {os.path.getsize(target):,} bytes "
                            f"is no Python script (more than {MAX_RECORDED_SCRIPT:,})")
    return Program("script", target, argv[1:]), cwd


def command_text(program) -> str:
    """The command a trial runs, as one line a shell would take, every control character escaped."""
    from dynscope.fix.trials import program_argv

    words = [sys.executable, *program_argv(program)]
    return " ".join(one_line(shlex.quote(w)) for w in words)


def one_line(text: str) -> str:
    from dynscope.safe_text import visible

    return visible(text).replace("\n", "\\n").replace("\t", "\\t")


def confirm_recorded(capture: str, program, cwd: str, *, yes: bool, command: str = "fix",
                     runs: str = "once per trial") -> None:
    """Show the recorded command and directory, and run them only if the user agrees
    (``dynscope fix --from`` and ``dynscope numerics --from``: ``command`` names the one asking)."""
    shown, where = command_text(program), one_line(cwd)
    if len(shown) + len(where) > MAX_SHOWN_COMMAND:
        raise DynscopeError(f"{capture} records a command of {len(shown):,} characters (more than "
                            f"{MAX_SHOWN_COMMAND:,} with its directory): too long to show, so it is not run; "
                            f"run the program yourself with dynscope {command} SCRIPT [ARGS...]")
    if yes:
        print(f"dynscope: running the command {one_line(capture)} recorded (--yes): {shown}  (in {where})",
              file=sys.stderr)
        return
    if not _stdin_is_terminal():
        raise DynscopeError(f"{capture} records the command {shown} (in {where}); {command} --from runs it again, {runs}"
                            ": read it, then pass --yes to run it (there is no terminal to ask on)")
    sys.stderr.write(f"dynscope {command} --from {one_line(capture)} runs the command that capture recorded, {runs}:\n"
                     f"  command:   {shown}\n"
                     f"  directory: {where}\n"
                     "A capture can come from anyone: run it only if you would run it yourself. Run it? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline(64).strip().lower()
    if answer not in ("y", "yes"):
        raise DynscopeError("not run: the recorded command was not confirmed")


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):
        return False
