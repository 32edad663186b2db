"""dynscope stages: list a compile's stages in pipeline order, recorded or missing (and why)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dynscope.commands._common import add_capture_argument, add_compile_argument

if TYPE_CHECKING:
    from dynscope.model import Stage

# The stage-name column is as wide as the longest name up to this; a longer name (a fused
# kernel's, 100-200 characters) is printed whole on a line of its own and its row continues
# under the column, so the other rows stay short in a pipe and the name can still be copied
# into `dynscope show --stage`.
KEY_COLUMN_MAX = 40


class Command:
    name = "stages"
    help = "list the stages of each compile in pipeline order (bytecode -> ... -> kernels)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_capture_argument(parser)
        add_compile_argument(parser, required=False)

    def run(self, args: argparse.Namespace) -> int:
        from rich.text import Text

        from dynscope.analysis.names import friendly_function, location
        from dynscope.model import Capture
        from dynscope.safe_console import safe_console

        # Plain lines rather than a table: long reasons soft-wrap instead of squeezing columns.
        console = safe_console(highlight=False, soft_wrap=True)
        with Capture.open(args.capture) as capture:
            compiles = [capture.compile(args.compile_id)] if args.compile_id else capture.compiles()
            for c in compiles:
                console.print(Text(f"{c.compile_id}  {friendly_function(c.function)}  "
                                   f"{location(c.file, c.line, capture.run.cwd)}  [{c.status}]", style="bold"))
                for line, dim in stage_lines(capture.stages(c.compile_id)):
                    console.print(Text(line, style="dim" if dim else ""))
                console.print()
        return 0


def stage_lines(stages: Sequence[Stage]) -> list[tuple[str, bool]]:
    """Each stage's row (text, dimmed), its columns aligned."""
    if not stages:
        return []
    width = min(max(len(s.key) for s in stages), KEY_COLUMN_MAX)
    lines: list[tuple[str, bool]] = []
    for stage in stages:
        if stage.recorded:
            views = f"  views: {', '.join(stage.variants)}" if len(stage.variants) > 1 else ""
            rest = f"{stage.language:<9}{stage.size:>9,} bytes{views}"
        else:
            rest = f"missing: {stage.missing_reason}"
        if len(stage.key) > width:
            lines.append((f"  {stage.key}", not stage.recorded))
            lines.append((f"  {'':<{width}}  {rest}", not stage.recorded))
        else:
            lines.append((f"  {stage.key:<{width}}  {rest}", not stage.recorded))
    return lines
