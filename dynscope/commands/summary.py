"""dynscope summary: print a capture's summary again (or as JSON, for scripts and CI)."""

from __future__ import annotations

import argparse
import json
import sys


class Command:
    name = "summary"
    help = "print the summary of a capture (--json: the documented JSON schema)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("capture", help="a .dynscope capture file")
        parser.add_argument("--json", action="store_true", help="print JSON (schema: docs/summary-json.md) to stdout")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.model import Capture

        with Capture.open(args.capture) as capture:
            if args.json:
                from dynscope.analysis.summary import summary_document

                json.dump(summary_document(capture), sys.stdout, indent=2)
                sys.stdout.write("\n")
            else:
                from dynscope.safe_text import safe_console

                from dynscope.reporters.terminal import render_summary

                render_summary(capture, safe_console(highlight=False))
        return 0
