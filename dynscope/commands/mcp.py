"""dynscope mcp: serve the Model Context Protocol over stdio, for coding agents (docs/mcp.md).

The tools read captures in one directory (--root, default the current one) and answer with
dynscope's JSON documents; tools that run a program are refused unless --allow-run is given.
"""

from __future__ import annotations

import argparse
import importlib.util
import os

from dynscope.errors import DynscopeError


class Command:
    name = "mcp"
    help = "serve captures to coding agents over the Model Context Protocol (stdio)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--root", default=".", metavar="DIR",
                            help="the directory served: every path a client names must be inside it (default: .)")
        parser.add_argument("--allow-run", action="store_true",
                            help="let clients run programs in DIR (explain, fix, judge_patch, minify); "
                                 "refused without it")
        parser.add_argument("--run-timeout", type=float, default=3600.0, metavar="SECONDS",
                            help="the longest a program-running tool may take (default 3600)")

    def run(self, args: argparse.Namespace) -> int:
        if importlib.util.find_spec("mcp") is None:
            raise DynscopeError("dynscope mcp needs the package 'mcp' (the Model Context Protocol SDK): "
                                "pip install 'dynscope[mcp]'")
        if not args.run_timeout > 0:
            raise DynscopeError("--run-timeout must be a positive number of seconds")
        from dynscope.agents.served import ServedDirectory
        from dynscope.agents.server import serve
        from dynscope.agents.tools import Tools

        served = ServedDirectory.at(os.path.abspath(args.root))
        serve(Tools(served, allow_run=args.allow_run, run_timeout_s=args.run_timeout))
        return 0
