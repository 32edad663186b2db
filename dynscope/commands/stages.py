"""dynscope stages: list a compile's stages in pipeline order, recorded or missing (and why)."""

from __future__ import annotations

import argparse

from dynscope.commands._common import add_capture_argument, add_compile_argument


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
        from dynscope.safe_text import safe_console

        # Plain lines rather than a table: long reasons soft-wrap instead of squeezing columns.
        console = safe_console(highlight=False, soft_wrap=True)
        with Capture.open(args.capture) as capture:
            compiles = [capture.compile(args.compile_id)] if args.compile_id else capture.compiles()
            for c in compiles:
                console.print(Text(f"{c.compile_id}  {friendly_function(c.function)}  "
                                   f"{location(c.file, c.line, capture.run.cwd)}  [{c.status}]", style="bold"))
                width = max(len(s.key) for s in capture.stages(c.compile_id))  # every row's columns align
                for stage in capture.stages(c.compile_id):
                    if stage.recorded:
                        views = f"  views: {', '.join(stage.variants)}" if len(stage.variants) > 1 else ""
                        console.print(Text(f"  {stage.key:<{width}}  {stage.language:<9}{stage.size:>9,} bytes{views}"))
                    else:
                        console.print(Text(f"  {stage.key:<{width}}  missing: {stage.missing_reason}", style="dim"))
                console.print()
        return 0
