"""dynscope numerics: where compiled and eager part ways -- every intermediate of the Inductor
graphs at their first call, compiled vs eager, each against a higher-precision reference.

    dynscope numerics [OPTIONS] SCRIPT [ARGS...]
    dynscope numerics [OPTIONS] -m MODULE [ARGS...]
    dynscope numerics --from CAPTURE [--yes] [OPTIONS]

It runs the program as ``explain`` does and records a capture with one ``NumericsChecked`` event.
Exit status: 1 when a node is suspect, 0 when the compiled run stays within eager's own error (or
only differs run to run), 2 for usage errors; with ``--try-remedies`` and a suspect: 0 when a remedy
was verified (docs/numerics-json.md), else 1. ``--from`` reruns the command a capture recorded
under the same consent rule as ``fix --from`` (shown first; y on a terminal or ``--yes``).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from typing import TYPE_CHECKING

from dynscope.commands._common import add_program_arguments, check_capture_output, program_from_args
from dynscope.errors import DynscopeError

if TYPE_CHECKING:
    from dynscope.events import NumericsChecked

USAGE = """dynscope numerics [OPTIONS] SCRIPT [ARGS...]
       dynscope numerics [OPTIONS] -m MODULE [ARGS...]
       dynscope numerics --from CAPTURE [OPTIONS]"""
SHOWN_NODES = 12


class Command:
    name = "numerics"
    help = ("find where the compiled run's numbers part from eager's: every intermediate of the Inductor graphs, "
            "judged against eager's own error (exit 1 when a node is suspect)")

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        from dynscope.numerics.criterion import DEFAULT_TOLERANCE

        parser.usage = USAGE
        parser.add_argument("-o", "--output", metavar="PATH",
                            help="capture file to write (default: <script>-<time>.dynscope in the current directory)")
        from dynscope.commands._common import add_document_options

        add_document_options(parser, inputs="program", json_dest="json_path", md_help=None,
                             json_help="also write the result as JSON (schema dynscope.numerics/1, "
                                       "docs/numerics-json.md; on stdout after the program's own output)")
        parser.add_argument("--factor", type=float, default=None, metavar="F",
                            help="a node is suspect when its compiled error exceeds F x eager's error + tolerance "
                                 "(default: torch's rule, 2, or 3 for bf16/fp16 and small tensors)")
        parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE, metavar="T",
                            help=f"the absolute slack of that rule (default {DEFAULT_TOLERANCE:g}, torch's)")
        parser.add_argument("--from", dest="capture", metavar="CAPTURE",
                            help="rerun the command a capture recorded (shown first; asks before running it)")
        parser.add_argument("--yes", action="store_true",
                            help="with --from: run the recorded command without asking (it is still shown)")
        parser.add_argument("--try-remedies", action="store_true",
                            help="when a node is suspect, rerun the program once per numerics remedy of the table "
                                 "(Inductor settings, torch.compiler.disable) with the check on, and report the "
                                 "suspect's error and the program's time before -> after (exit 0 when one is verified)")
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr (the result is still printed)")
        add_program_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.commands._common import refuse_program_as_document
        from dynscope.commands.fix import confirm_recorded, recorded_program
        from dynscope.fix.trial_payload import TrialRemedies
        from dynscope.numerics.child import NumericsOptions
        from dynscope.runner.cache_dirs import private_cache_dir
        from dynscope.runner.launcher import capture_path_for, launch
        from dynscope.runner.spec import ChildSpec

        refuse_program_as_document(args)
        if args.factor is not None and not (math.isfinite(args.factor) and args.factor > 0):
            raise DynscopeError("--factor must be a positive number")
        if not (math.isfinite(args.tolerance) and args.tolerance >= 0):
            raise DynscopeError("--tolerance must be a number, not negative")
        if args.yes and args.capture is None:
            raise DynscopeError("--yes goes with --from CAPTURE (it answers the question before a recorded command runs)")
        program, cwd = program_from_args(args), None
        if args.capture is not None:
            if program is not None:
                raise DynscopeError("give either a program to run or --from CAPTURE, not both")
            program, cwd = recorded_program(args.capture)
            confirm_recorded(args.capture, program, cwd, yes=args.yes, command="numerics", runs="once")
        if program is None:
            raise DynscopeError("numerics needs a program to run (dynscope numerics SCRIPT [ARGS...]) "
                                "or a capture (dynscope numerics --from CAPTURE)")
        from dynscope.commands._common import STDOUT, refuse_overwriting_a_capture, write_document

        if args.json_path and args.json_path != STDOUT:
            refuse_overwriting_a_capture(args.json_path, [args.capture] if args.capture else [])
        path = capture_path_for(program, args.output, rank=None, world_size=None)
        from dynscope.fix.trials import program_argv

        command = ("dynscope", "numerics", *program_argv(program))  # the model reads the program's command back
        options = NumericsOptions(args.factor, args.tolerance)
        # --try-remedies: the baseline also records what this torch offers the remedies (fix's trial
        # extension with no remedy to apply writes FixFeatures), so the table can choose among them.
        remedy_features = (TrialRemedies(()).extension(),) if args.try_remedies else ()
        from dynscope.commands._progress import Progress
        from dynscope.runner.live_counts import CaptureCounter
        from dynscope.runner.program import check_runnable

        check_runnable(program)  # a script that cannot run is said in one line, before any progress
        check_capture_output(path)
        # Caches off in a private directory: the check sees every graph Inductor compiles (a cache
        # hit would skip the compile it hooks), and the user's cache is neither read nor written.
        with private_cache_dir("numerics") as caches, \
                Progress("numerics", quiet=args.quiet, counts=CaptureCounter(path).read) as progress:
            progress.stage(f"running {program.display} with every Inductor graph checked")
            spec = ChildSpec(program, path, command, workdir=cwd, cache_dir=caches,
                             extensions=(*remedy_features, options.extension()))
            result = launch(spec, popen_kwargs={"stdin": subprocess.DEVNULL} if args.capture else None)
        record = _recorded(path) if result.capture_written else None
        if record is None or (record.graphs_checked == 0 and not record.notes):
            raise DynscopeError(f"the program ended (status {result.returncode}) with no Inductor graph checked: "
                                "numerics checks graphs compiled with backend=\"inductor\" (the default) at their first "
                                f"call (capture: {path})", exit_code=2)
        _report(record, path)
        if result.returncode != 0:
            print(f"dynscope: note: the program itself exited with status {result.returncode}", file=sys.stderr)
        outcomes = None
        if args.try_remedies:
            from dynscope.commands.numerics_remedies import report_outcomes, try_remedies

            outcomes = try_remedies(program, cwd, path, record, options, from_capture=args.capture is not None)
            report_outcomes(outcomes)
        if args.json_path:
            from dynscope.numerics.document import document
            from dynscope.numerics.remedy_trials import outcome_json

            doc = document(record, capture=path)
            if outcomes is not None:
                doc["remedies"] = [outcome_json(o) for o in outcomes]
            write_document(args.json_path, json.dumps(doc, indent=2) + "\n", [args.capture] if args.capture else [])
        from dynscope.numerics.criterion import exit_status

        if outcomes is not None and record.verdict == "suspect":
            from dynscope.numerics.remedy_trials import remedies_exit_status

            return remedies_exit_status(outcomes)
        return exit_status(record.verdict)


def _recorded(path: str) -> NumericsChecked | None:
    from dynscope.events import NumericsChecked
    from dynscope.model import Capture

    with Capture.open(path) as capture:
        found = capture.record_reader.records(NumericsChecked)
    return found[-1][0] if found else None


def _report(record: NumericsChecked, path: str) -> None:
    """The result in plain lines on stderr (the views -- summary, TUI, HTML -- show it in full)."""
    from dynscope.numerics.criterion import NONFINITE_ERROR
    from dynscope.safe_text import one_line

    def err(value: float) -> str:
        return "non-finite" if value >= NONFINITE_ERROR else f"{value:.3g}"

    out: list[str] = []
    words = {"suspect": "SUSPECT: the compiled run parts from eager beyond eager's own error",
             "within": "within eager's own error: no node is suspect",
             "nondeterministic": "within eager's own error; some nodes differ run to run (nondeterministic), none suspect"}
    out.append(f"dynscope numerics: {words.get(record.verdict, record.verdict)}")
    out.append(f"  checked {record.graphs_checked} graph(s), {len(record.nodes)} intermediate(s); program "
               f"{record.program_dtype or '?'}, reference {record.reference_dtype or '?'}"
               + (f"; {record.not_compared} computed from random numbers not compared" if record.not_compared else ""))
    out.append(f"  criterion: {record.criterion}")
    if record.first_suspect is not None and 0 <= record.first_suspect < len(record.nodes):
        n = record.nodes[record.first_suspect]
        out.append(f"  first suspect: {n.node} ({n.op}) in graph {n.graph} {n.direction}: compiled error "
                   f"{err(n.compiled_error)} vs eager {err(n.eager_error)}")
        out.append(f"    kernel: {n.kernel or '(extern / none)'}")
        out.append(f"    source: {n.source or '(no user line recorded)'}")
        for frame in n.stack:
            out.append(f"      {frame.file}:{frame.line} in {frame.function}" + (f": {frame.code}" if frame.code else ""))
    flagged = [n for n in record.nodes if n.suspect or n.nondeterministic][:SHOWN_NODES]
    if flagged:
        out.append("  nodes:")
        for n in flagged:
            mark = "suspect" if n.suspect else "nondeterministic"
            out.append(f"    {n.graph} {n.direction[:3]} #{n.index:<4} {n.node:<24} {mark:<16} compiled {err(n.compiled_error):>10} "
                       f"eager {err(n.eager_error):>10}  {n.kernel}")
    for note in record.notes:
        out.append(f"  note: {note}")
    out.append(f"  capture: {path}")
    for line in out:
        print(one_line(line), file=sys.stderr)
