"""dynscope diff: what changed between two stages of a compile, or between two compiles of a frame."""

from __future__ import annotations

import argparse
import sys

from dynscope.commands._common import add_capture_argument, add_compile_argument, resolve_stage
from dynscope.errors import DynscopeError


class Command:
    name = "diff"
    help = "diff two stages (--from A --to B) of a compile, or two compiles (--compile ID1 --against ID2)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_capture_argument(parser)
        add_compile_argument(parser, required=True)
        parser.add_argument("--from", dest="from_stage", metavar="A", help="earlier stage (default: the one --to came from)")
        parser.add_argument("--to", dest="to_stage", metavar="B", help="later stage")
        parser.add_argument("--against", metavar="ID2", help="another compile of the same frame (e.g. a recompile)")
        parser.add_argument("--raw", action="store_true", help="plain text, no colour")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.analysis.diff import diff_compiles, diff_stages, previous_recorded
        from dynscope.model import Capture

        with Capture.open(args.capture) as capture:
            if args.against:
                _warn_if_unrelated(capture, args.compile_id, args.against)
                compiles = diff_compiles(capture, args.compile_id, args.against)
                lines = _compile_lines(compiles)
                text = compiles.graph.text_diff if compiles.graph else ()
            else:
                if not args.to_stage:
                    raise DynscopeError("say which stages to compare: --from A --to B (or --against ID2 for compiles)")
                after = resolve_stage(capture, args.compile_id, args.to_stage)
                if args.from_stage:
                    before = resolve_stage(capture, args.compile_id, args.from_stage)
                else:
                    before = previous_recorded(capture.stages(args.compile_id), after)
                    if before is None:
                        raise DynscopeError(f"stage {after.key} has no earlier recorded stage to compare with")
                for stage in (before, after):
                    if not stage.recorded:
                        raise DynscopeError(f"stage {stage.key} is missing: {stage.missing_reason}", exit_code=1)
                stages = diff_stages(capture, before, after)
                lines = stages.summary_lines()
                text = stages.text_diff
        _print(lines, text, raw=args.raw or not sys.stdout.isatty())
        return 0


def _warn_if_unrelated(capture, compile_a: str, compile_b: str) -> None:
    """--against is for two compiles of one frame (a recompile); say so when they are not."""
    from dynscope.analysis.names import friendly_function, location

    a, b = capture.compile(compile_a), capture.compile(compile_b)
    if a.frame_id == b.frame_id and a.function == b.function:
        return
    from dynscope.safe_text import one_line

    cwd = capture.run.cwd
    print(one_line(f"dynscope: compiles {a.compile_id} and {b.compile_id} are of different frames "
                   f"({friendly_function(a.function)} at {location(a.file, a.line, cwd)}, "
                   f"{friendly_function(b.function)} at {location(b.file, b.line, cwd)}): this compares "
                   "unrelated code, not a recompile"), file=sys.stderr)


def _compile_lines(result) -> list[str]:
    lines = [f"compile {result.compile_a} → {result.compile_b}"]
    if result.recompile_reason:
        lines.append(f"recompiled because: {result.recompile_reason}")
    if result.graph is not None:
        lines += ["graph: " + line for line in result.graph.summary_lines()[1:]] or ["graph: unchanged"]
    lines.append(result.guard_count_line)
    lines += [f"  {change.describe()}" for change in result.guard_changes]
    return lines


def _print(lines: list[str], text_diff, *, raw: bool) -> None:
    if raw:
        from dynscope.safe_text import visible

        sys.stdout.write(visible("\n".join([*lines, "", *text_diff])) + "\n")
        return
    from rich.syntax import Syntax
    from rich.text import Text

    from dynscope.safe_console import safe_console

    console = safe_console(highlight=False)
    console.print(Text(lines[0], style="bold"))
    for line in lines[1:]:
        console.print(Text(line))
    if text_diff:
        console.print()
        console.print(Syntax("\n".join(text_diff), "diff", word_wrap=False))
