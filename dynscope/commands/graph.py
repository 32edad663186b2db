"""dynscope graph: draw a stage's FX graph (SVG via graphviz, or DOT text)."""

from __future__ import annotations

import argparse
import os
import sys

from dynscope.commands._common import (
    add_capture_argument,
    add_compile_argument,
    refuse_overwriting_a_capture,
    resolve_stage,
)
from dynscope.errors import DynscopeError


class Command:
    name = "graph"
    help = "draw a stage's FX graph as SVG (or .dot); big graphs are collapsed by module or kernel"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_capture_argument(parser)
        add_compile_argument(parser, required=True)
        parser.add_argument("--stage", required=True, metavar="NAME", help="an FX stage: dynamo, aot_forward, post_grad, ...")
        parser.add_argument("-o", "--output", required=True, metavar="PATH", help="g.svg, g.png or g.pdf (drawn with graphviz) or g.dot")
        parser.add_argument("--collapse", choices=("none", "module", "kernel"),
                            help="group nodes (default: only when the graph is too big to read)")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.analysis.dot import IMAGE_FORMATS, render_image, stage_to_dot
        from dynscope.model import Capture

        # The format is the output's extension; refuse one we cannot really write.
        fmt = os.path.splitext(args.output)[1].lower().lstrip(".")
        if fmt not in ("dot", *IMAGE_FORMATS):
            raise DynscopeError(f"cannot draw {args.output}: give -o a path ending in .svg, .png, .pdf "
                                "(drawn by graphviz) or .dot (the DOT text)")
        refuse_overwriting_a_capture(args.output, [args.capture])
        with Capture.open(args.capture) as capture:
            stage = resolve_stage(capture, args.compile_id, args.stage)
            dot_text = stage_to_dot(capture, stage, collapse=args.collapse)
        if fmt == "dot":
            _write(args.output, dot_text.encode("utf-8"))
            return 0
        try:
            image = render_image(dot_text, fmt)
        except DynscopeError as e:
            fallback = os.path.splitext(args.output)[0] + ".dot"
            refuse_overwriting_a_capture(fallback, [args.capture])
            _write(fallback, dot_text.encode("utf-8"))
            from dynscope.safe_text import one_line

            print(one_line(f"dynscope: {e}; wrote the DOT text to {fallback} instead"), file=sys.stderr)
            return 1
        _write(args.output, image)
        return 0


def _write(path: str, data: bytes) -> None:
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise DynscopeError(f"cannot write {path}: {e.strerror}") from None
