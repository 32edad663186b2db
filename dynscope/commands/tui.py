"""dynscope tui: walk through a capture in the terminal (Textual)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from dynscope.commands._common import add_source_arguments, source_roots
from dynscope.errors import DynscopeError


class Command:
    name = "tui"
    help = "explore a capture in the terminal: breaks, recompiles, stages step by step, kernels"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("captures", nargs="+", metavar="capture",
                            help="a .dynscope capture file; several (one per rank): the first is shown, "
                                 "with where the ranks diverge on its overview")
        add_source_arguments(parser)
        parser.add_argument("--against", metavar="BASE", help="compare with this earlier capture (shown on the overview)")

    def run(self, args: argparse.Namespace) -> int:
        open_tui(args.captures[0], others=args.captures[1:], any_source=args.any_source, against=args.against,
                 source_roots=source_roots(args))
        return 0


def open_tui(path: str, others: list[str] | None = None, *, any_source: bool = False,
             against: str | None = None, source_roots: tuple[str, ...] = ()) -> None:
    """Open the capture, then the UI. A missing, damaged or too-new capture fails here, with
    one line, before the terminal is switched into the UI (the app reads the overview's
    records when it is created)."""
    from dynscope.model import Capture

    with Capture.open(path) as capture:
        from dynscope.tui.app import DynscopeApp  # Textual is imported by this subcommand only

        divergence: tuple = ()
        if others:
            from dynscope.analysis.ranks import divergence as rank_divergence

            rest = [Capture.open(p) for p in others]
            try:
                divergence = rank_divergence([capture, *rest])
            finally:
                for other in rest:
                    other.close()
        app = DynscopeApp(capture, export_html=html_exporter(path, any_source, source_roots), divergence=divergence,
                          comparison=_comparison(capture, against), any_source=any_source,
                          source_roots=source_roots)
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise DynscopeError("the terminal UI needs an interactive terminal; "
                                f"for a text summary run `dynscope summary {path}`")
        app.run()


def _comparison(capture, against: str | None) -> tuple[str, ...]:
    """The other run's name and what changed since it, for the overview."""
    if against is None:
        return ()
    from dynscope.analysis.changes import comparison_lines
    from dynscope.analysis.compare import compare
    from dynscope.model import Capture

    with Capture.open(against) as base:
        return (base.run.path, *comparison_lines(compare(base, capture)))


def html_exporter(capture_path: str, any_source: bool = False,
                  source_roots: tuple[str, ...] = ()) -> Callable[[str], None] | None:
    """What the `e` key calls to write the HTML report, or None when the reporter is not installed."""
    try:
        from dynscope.commands.report import write_report
    except ImportError:
        return None

    def export(out_path: str) -> None:
        write_report([capture_path], out_path, fmt="html", any_source=any_source, source_roots=source_roots)

    return export
