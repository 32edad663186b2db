"""dynscope summary: print a capture's summary again (or as JSON, for scripts and CI)."""

from __future__ import annotations

import argparse
import sys


class Command:
    name = "summary"
    help = "print the summary of a capture (--json: the documented JSON schema)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("captures", nargs="+", metavar="capture",
                            help="a .dynscope capture file; several (one per rank): where the ranks diverge")
        parser.add_argument("--json", action="store_true", help="print JSON (schema: docs/summary-json.md) to stdout")
        parser.add_argument("--compile-time", action="store_true",
                            help="add compile time by phase per compile and frame, and the costliest modules")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.model import Capture

        if len(args.captures) > 1:
            return _several(args)
        with Capture.open(args.captures[0]) as capture:
            if args.json:
                from dynscope.analysis.run_view import run_view
                from dynscope.analysis.summary import summary_document
                from dynscope.safe_text import json_text

                doc = summary_document(run_view(capture), compile_time=args.compile_time)
                sys.stdout.write(json_text(doc, indent=2) + "\n")
            else:
                from dynscope.reporters import ReportOptions, prepare_report

                prepare_report("terminal", [capture], ReportOptions(compile_time=args.compile_time)).render(sys.stdout)
        return 0


def _several(args: argparse.Namespace) -> int:
    from dynscope.model import Capture

    captures = [Capture.open(path) for path in args.captures]
    try:
        if args.json:
            from dynscope.analysis.summary import summary_set_document
            from dynscope.safe_text import json_text

            sys.stdout.write(json_text(summary_set_document(captures), indent=2) + "\n")
        else:
            from dynscope.reporters import prepare_report

            prepare_report("terminal", captures).render(sys.stdout)
    finally:
        for capture in captures:
            capture.close()
    return 0
