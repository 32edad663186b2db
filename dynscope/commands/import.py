"""dynscope import: TORCH_TRACE logs (files or directories, plain or gzip) into captures, one per rank."""

from __future__ import annotations

import argparse
import sys


class Command:
    name = "import"
    help = "import TORCH_TRACE logs into captures (one per rank: OUT.rankN.dynscope when several)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH",
                            help="TORCH_TRACE log files or directories (dedicated_log_torch_trace_*.log, .gz too)")
        parser.add_argument("-o", "--output", required=True, metavar="OUT.dynscope", help="the capture to write")
        parser.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.safe_text import one_line
        from dynscope.trace_import import MAX_EVENT_BYTES, MAX_METADATA_BYTES, import_logs

        for i, done in enumerate(import_logs(args.paths, args.output)):
            if args.quiet:
                continue
            s = done.stats
            if i == 0:  # the same directories for every rank: say once what was not read
                for note in s.skipped_files:
                    print(one_line(f"dynscope: {note}"), file=sys.stderr)
            rank = f"rank {done.rank}: " if done.rank is not None else ""
            notes = []
            if s.bad_lines:
                notes.append(f"{s.bad_lines} unreadable line{'s' if s.bad_lines != 1 else ''}"
                             f" (first: {s.bad_examples[0]})")
            if s.oversized_events:
                notes.append(f"{s.oversized_events} oversized event{'s' if s.oversized_events != 1 else ''} "
                             f"skipped (over {MAX_EVENT_BYTES >> 20} MiB, or a line over "
                             f"{MAX_METADATA_BYTES >> 20} MiB of JSON)")
            if s.payload_mismatches:
                notes.append(f"{s.payload_mismatches} payloads cut short")
            if s.unknown_events:
                notes.append("unknown events kept: " + ", ".join(f"{k} ×{v}" for k, v in s.unknown_events.items()))
            # The notes quote the log (an unreadable line): one line, control characters visible.
            print(one_line(f"dynscope: {rank}{s.events} events from {len(s.files)} file{'s' if len(s.files) != 1 else ''}"
                           f" → {done.path}" + ("; " + "; ".join(notes) if notes else "")), file=sys.stderr)
        return 0
