"""dynscope show: print one stage of a compile (IR, code, a kernel), syntax highlighted."""

from __future__ import annotations

import argparse
import sys

from dynscope.commands._common import add_capture_argument, add_compile_argument, resolve_stage
from dynscope.errors import DynscopeError


class Command:
    name = "show"
    help = "print one stage of a compile (e.g. --stage post_grad, --stage kernel:cpp_fused_gelu_0)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_capture_argument(parser)
        add_compile_argument(parser, required=True)
        parser.add_argument("--stage", required=True, metavar="NAME", help="stage name or key (see `dynscope stages`)")
        parser.add_argument("--view", metavar="VARIANT", help="another view of the stage: before/after, original/modified")
        parser.add_argument("--raw", action="store_true", help="plain text, no highlighting or line numbers")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.model import Capture

        with Capture.open(args.capture) as capture:
            stage = resolve_stage(capture, args.compile_id, args.stage)
            if not stage.recorded:
                raise DynscopeError(f"stage {stage.key} of compile {stage.compile_id} is missing: {stage.missing_reason}",
                                    exit_code=1)
            text = capture.stage_text(stage, args.view)
        if args.raw or not sys.stdout.isatty():
            from dynscope.safe_text import visible

            text = visible(text)
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            return 0
        from rich.syntax import Syntax

        from dynscope.model.stages import lexer_for
        from dynscope.safe_console import safe_console

        safe_console().print(Syntax(text, lexer_for(stage.language), line_numbers=True, word_wrap=False))
        return 0
