"""dynscope compare: what changed between two runs of a program (breaks, recompiles, errors, time)."""

from __future__ import annotations

import argparse
from contextlib import ExitStack

from dynscope.errors import DynscopeError

SET_SCHEMA = "dynscope.compare-set/1"


class Command:
    name = "compare"
    help = "compare two captures of the same program: breaks added/removed/moved, recompiles, errors, compile time"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        from dynscope.commands._common import add_document_options

        # nargs "*": `compare --json main.dynscope branch.dynscope` names captures (_common.add_document_options)
        parser.add_argument("captures", nargs="*", metavar="CAPTURE",
                            help="BEFORE AFTER (e.g. main's capture, then your branch's); several ranks: all "
                                 "BEFORE ranks, then all AFTER ranks in the same order (main.rank*.dynscope "
                                 "branch.rank*.dynscope), compared rank by rank")
        add_document_options(parser, inputs="captures", json_help="the dynscope.compare/1 document (docs/summary-json.md)",
                             md_help="Markdown for a pull request or an issue")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.analysis.compare import compare, comparison_document
        from dynscope.commands._common import stray_inputs, write_document
        from dynscope.model import Capture

        paths = args.captures = stray_inputs(args) + args.captures
        if len(paths) < 2 or len(paths) % 2:
            raise DynscopeError(f"give BEFORE and AFTER captures, as many of each ({len(paths)} given)")
        half = len(paths) // 2
        with ExitStack() as stack:
            captures = [stack.enter_context(Capture.open(p)) for p in paths]
            results = [compare(b, a) for b, a in zip(captures[:half], captures[half:])]
            if args.json is not None:
                documents = [comparison_document(r) for r in results]
                document = documents[0] if half == 1 else {"schema": SET_SCHEMA, "ranks": documents}
                from dynscope.safe_text import json_text

                write_document(args.json, json_text(document, indent=2) + "\n", paths)
            if args.md is not None:
                from dynscope.reporters.markdown import comparison_markdown

                write_document(args.md, "\n".join(comparison_markdown(r) for r in results), paths)
            if args.json is None and args.md is None:
                for result in results:
                    print_comparison(result)
        return 0


def print_comparison(result) -> None:
    from rich.text import Text

    from dynscope.analysis.changes import comparison_lines
    from dynscope.safe_console import safe_console

    console = safe_console(highlight=False, soft_wrap=True)
    console.print(Text(f"{result.before.run.path} → {result.after.run.path}", style="bold"))
    styles = {"+": "red", "-": "green", "~": "yellow"}
    for line in comparison_lines(result):
        console.print(Text(line, style=styles.get(line[:1], "")))
