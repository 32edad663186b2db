"""dynscope check: fail a CI job when a run has more graph breaks, recompiles or errors than allowed."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack

from dynscope.errors import DynscopeError

# Exit status when a limit is exceeded (2 is taken by bad input, as everywhere in dynscope).
LIMIT_EXCEEDED = 1


class Command:
    name = "check"
    help = "exit non-zero when a capture exceeds --max-graph-breaks / --max-recompiles / --max-errors (for CI)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("captures", nargs="+", metavar="CAPTURE", help=".dynscope capture files (every rank counts)")
        parser.add_argument("--max-graph-breaks", type=_count, metavar="N", help="graph breaks allowed (occurrences)")
        parser.add_argument("--max-recompiles", type=_count, metavar="M", help="recompiles allowed")
        parser.add_argument("--max-errors", type=_count, metavar="K", help="compile errors allowed")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.analysis.overview import totals
        from dynscope.model import Capture

        limits = {"graph breaks": args.max_graph_breaks, "recompiles": args.max_recompiles,
                  "compile errors": args.max_errors}
        if all(limit is None for limit in limits.values()):
            raise DynscopeError("give at least one limit: --max-graph-breaks N, --max-recompiles M or --max-errors K")
        exceeded = False
        with ExitStack() as stack:
            for path in args.captures:
                t = totals(stack.enter_context(Capture.open(path)))
                found = {"graph breaks": t.graph_breaks, "recompiles": t.recompiles, "compile errors": t.errors}
                for what, limit in limits.items():
                    if limit is None:
                        continue
                    over = found[what] > limit
                    exceeded |= over
                    print(f"{path}: {found[what]} {what} (at most {limit} allowed): {'FAIL' if over else 'ok'}")
        sys.stdout.flush()
        return LIMIT_EXCEEDED if exceeded else 0


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {value}")
    return value
