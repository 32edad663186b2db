"""dynscope compare: what changed between two runs of a program (breaks, recompiles, errors, time)."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack


class Command:
    name = "compare"
    help = "compare two captures of the same program: breaks added/removed/moved, recompiles, errors, compile time"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("before", metavar="BEFORE", help="the earlier capture (e.g. main's)")
        parser.add_argument("after", metavar="AFTER", help="the later capture (e.g. your branch's)")
        form = parser.add_mutually_exclusive_group()
        form.add_argument("--json", action="store_true", help="the dynscope.compare/1 document (docs/compare-json.md)")
        form.add_argument("--md", action="store_true", help="Markdown for a pull request or an issue")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.analysis.compare import compare, comparison_document
        from dynscope.model import Capture

        with ExitStack() as stack:
            before = stack.enter_context(Capture.open(args.before))
            after = stack.enter_context(Capture.open(args.after))
            result = compare(before, after)
            if args.json:
                json.dump(comparison_document(result), sys.stdout, indent=2, ensure_ascii=False)
                sys.stdout.write("\n")
            elif args.md:
                from dynscope.reporters.markdown import comparison_markdown

                sys.stdout.write(comparison_markdown(result))
            else:
                print_comparison(result)
        return 0


def print_comparison(result) -> None:
    from rich.text import Text

    from dynscope.analysis.changes import comparison_lines
    from dynscope.safe_text import safe_console

    console = safe_console(highlight=False, soft_wrap=True)
    console.print(Text(f"{result.before.run.path} → {result.after.run.path}", style="bold"))
    styles = {"+": "red", "-": "green", "~": "yellow"}
    for line in comparison_lines(result):
        console.print(Text(line, style=styles.get(line[:1], "")))
