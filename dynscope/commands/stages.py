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
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        from dynscope.analysis.names import friendly_function, location
        from dynscope.model import Capture

        console = Console(highlight=False)
        with Capture.open(args.capture) as capture:
            compiles = [capture.compile(args.compile_id)] if args.compile_id else capture.compiles()
            for c in compiles:
                console.print(Text(f"{c.compile_id}  {friendly_function(c.function)}  "
                                   f"{location(c.file, c.line, capture.run.cwd)}  [{c.status}]", style="bold"))
                table = Table(show_edge=False, pad_edge=False, box=None, padding=(0, 2, 0, 2))
                table.add_column("stage")
                table.add_column("what")
                table.add_column("size", justify="right")
                table.add_column("views")
                for stage in capture.stages(c.compile_id):
                    if stage.recorded:
                        views = ", ".join(stage.variants) if len(stage.variants) > 1 else ""
                        table.add_row(stage.key, stage.language, f"{stage.size:,}", views)
                    else:
                        table.add_row(Text(stage.key, style="dim"), Text(f"missing: {stage.missing_reason}", style="dim"), "", "")
                console.print(table)
                console.print()
        return 0
