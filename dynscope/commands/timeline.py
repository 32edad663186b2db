"""dynscope timeline: the compile timeline of one or more captures (one per rank) as a Chrome trace."""

from __future__ import annotations

import argparse
import sys


class Command:
    name = "timeline"
    help = "write the compile timeline (Chrome trace event JSON: Perfetto, chrome://tracing), one track per rank"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("captures", nargs="+", metavar="capture", help=".dynscope capture files (one per rank)")
        parser.add_argument("-o", "--output", required=True, metavar="trace.json", help="the JSON file to write")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.analysis.timeline import timeline_document
        from dynscope.commands._common import refuse_overwriting_a_capture
        from dynscope.errors import DynscopeError
        from dynscope.model import Capture
        from dynscope.safe_text import json_text, one_line

        refuse_overwriting_a_capture(args.output, args.captures)
        captures = [Capture.open(path) for path in args.captures]
        try:
            document = timeline_document(captures)
        finally:
            for capture in captures:
                capture.close()
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(json_text(document, separators=(",", ":")))
        except OSError as e:
            raise DynscopeError(f"cannot write {args.output}: {e.strerror}") from None
        print(f"dynscope: wrote {one_line(args.output)} ({len(document['traceEvents'])} events; "
              "open it in https://ui.perfetto.dev or chrome://tracing)", file=sys.stderr)
        return 0
