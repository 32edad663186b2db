"""dynscope report: write a capture (or every rank's capture) as HTML, Markdown or JSON."""

from __future__ import annotations

import argparse
import io
import os
import sys
from contextlib import ExitStack

from dynscope.commands._common import add_source_arguments, refuse_overwriting_a_capture, source_roots
from dynscope.errors import DynscopeError

FORMATS = ("html", "md", "json")
_SUFFIXES = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".json": "json"}


class Command:
    name = "report"
    help = "write a report of one or more captures (one per rank): self-contained HTML, Markdown or JSON"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        from dynscope.commands._common import add_document_options

        # nargs "*": `report --md run.dynscope` names the capture (_common.add_document_options)
        parser.add_argument("captures", nargs="*", metavar="CAPTURE", help=".dynscope capture files (several: one per rank)")
        parser.add_argument("-o", "--output", metavar="PATH", help="report file; Markdown and JSON go to stdout without it")
        parser.add_argument("--format", choices=FORMATS, help="html, md or json (default: from the output's suffix)")
        add_document_options(parser, inputs="captures", json_help="the JSON report (as --format json [-o PATH])",
                             md_help="the Markdown report (as --format md [-o PATH])")
        add_source_arguments(parser)
        parser.add_argument("--against", metavar="BASE", help="compare with this earlier capture (e.g. main's) first")
        parser.add_argument("--compile-time", action="store_true",
                            help="Markdown: add compile time by phase per frame (HTML always has it)")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.commands._common import STDOUT, stray_inputs

        args.captures = stray_inputs(args) + args.captures
        if not args.captures:
            raise DynscopeError("give a capture to report on: dynscope report run.dynscope -o report.html")
        for flag, fmt_of_flag in (("--json", args.json), ("--md", args.md)):
            if fmt_of_flag is None:
                continue
            if args.output is not None or args.format is not None or (args.json is not None and args.md is not None):
                raise DynscopeError(f"{flag} [PATH] names the format and the file itself: give it without -o, "
                                    "--format or the other of --json / --md")
            args.format = "json" if flag == "--json" else "md"
            args.output = None if fmt_of_flag == STDOUT else fmt_of_flag
        fmt = report_format(args.output, args.format)
        write_report(args.captures, args.output, fmt=fmt, any_source=args.any_source, against=args.against,
                     source_roots=source_roots(args), compile_time=args.compile_time)
        if args.output:
            print(f"dynscope: wrote {args.output}", file=sys.stderr)
        return 0


def report_format(output: str | None, fmt: str | None) -> str:
    if fmt:
        return fmt
    if output is None:
        raise DynscopeError("say where the report goes (-o report.html) or which format to print (--format md|json)")
    suffix = os.path.splitext(output)[1].lower()
    if suffix not in _SUFFIXES:
        raise DynscopeError(f"cannot tell the report format from {output!r}: use a .html, .md or .json name, or --format")
    return _SUFFIXES[suffix]


def write_report(paths: list[str], output: str | None, *, fmt: str, any_source: bool = False,
                 against: str | None = None, source_roots: tuple[str, ...] = (), compile_time: bool = False) -> None:
    """Render the captures at ``paths`` as ``fmt`` into ``output`` (stdout when None)."""
    from dynscope.model import Capture

    if fmt == "html" and output is None:
        raise DynscopeError("an HTML report needs a file: -o report.html")
    if output is not None:
        refuse_overwriting_a_capture(output, [*paths, *([against] if against else [])])
    with ExitStack() as stack:
        captures = [stack.enter_context(Capture.open(p)) for p in paths]
        comparison = None
        if against is not None:
            from dynscope.analysis.compare import compare

            comparison = compare(stack.enter_context(Capture.open(against)), captures[0])
        from dynscope.reporters import ReportOptions, prepare_report

        reporter = prepare_report(fmt, captures, ReportOptions(any_source=any_source, comparison=comparison,
                                                                 source_roots=source_roots, compile_time=compile_time))
        buffer = io.StringIO()
        reporter.render(buffer)
        text = buffer.getvalue()
    if output is None:
        sys.stdout.write(text)
        return
    try:
        # Lone surrogates (undecodable bytes in file names) survive as visible \udcxx escapes.
        with open(output, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
    except OSError as e:
        raise DynscopeError(f"cannot write {output}: {e.strerror}") from None
