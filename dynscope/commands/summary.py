"""dynscope summary: print a capture's summary again (or as JSON, for scripts and CI; or Markdown)."""

from __future__ import annotations

import argparse
import sys

from dynscope.errors import DynscopeError


class Command:
    name = "summary"
    help = "print the summary of a capture (--json: the documented JSON schema; --md: Markdown)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        from dynscope.commands._common import add_document_options

        # nargs "*": `summary --json run.dynscope` names the capture (see _common.add_document_options)
        parser.add_argument("captures", nargs="*", metavar="capture",
                            help="a .dynscope capture file; several (one per rank): where the ranks diverge")
        add_document_options(parser, inputs="captures", json_help="the summary as JSON (schema: docs/summary-json.md)",
                             md_help="the summary as Markdown (as report -o FILE.md writes it)")
        parser.add_argument("--compile-time", action="store_true",
                            help="add compile time by phase per compile and frame, and the costliest modules")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.commands._common import stray_inputs
        from dynscope.model import Capture

        args.captures = stray_inputs(args) + args.captures
        if not args.captures:
            raise DynscopeError("give a capture to summarize: dynscope summary run.dynscope")
        if len(args.captures) > 1:
            return _several(args)
        with Capture.open(args.captures[0]) as capture:
            _documents(args, [capture])
            if args.json is None and args.md is None:
                from dynscope.reporters import ReportOptions, prepare_report

                prepare_report("terminal", [capture], ReportOptions(compile_time=args.compile_time)).render(sys.stdout)
        return 0


def _documents(args: argparse.Namespace, captures: list) -> None:
    """The --json and --md documents asked for (each to its path, or stdout)."""
    from dynscope.commands._common import write_document

    if args.json is not None:
        from dynscope.safe_text import json_text

        if len(captures) == 1:
            from dynscope.analysis.run_view import run_view
            from dynscope.analysis.summary import summary_document

            doc = summary_document(run_view(captures[0]), compile_time=args.compile_time)
        else:
            from dynscope.analysis.summary import summary_set_document

            doc = summary_set_document(captures)
        write_document(args.json, json_text(doc, indent=2) + "\n", args.captures)
    if args.md is not None:
        from dynscope.reporters.markdown import markdown_report

        write_document(args.md, markdown_report(captures, compile_time=args.compile_time), args.captures)


def _several(args: argparse.Namespace) -> int:
    from dynscope.model import Capture

    captures = [Capture.open(path) for path in args.captures]
    try:
        _documents(args, captures)
        if args.json is None and args.md is None:
            from dynscope.reporters import prepare_report

            prepare_report("terminal", captures).render(sys.stdout)
    finally:
        for capture in captures:
            capture.close()
    return 0
