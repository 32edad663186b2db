"""dynscope share: a copy of a capture fit for a public issue (no source text, no absolute paths,
no user or host name, no command line or environment, no string value in a guard), which every view
opens; prints what it removed and what it kept."""

from __future__ import annotations

import argparse
import os

from dynscope.errors import DynscopeError


class Command:
    name = "share"
    help = ("write a copy of a capture fit for a public issue: source text replaced by hashes, paths made "
            "relative, the command and environment removed")

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("capture", help="the .dynscope capture to share")
        parser.add_argument("-o", "--output", required=True, metavar="PATH",
                            help="the bundle to write (e.g. bug.dynscope); any view opens it. Like explain -o, "
                                 "it replaces a capture there, never another file and never the capture shared")
        parser.add_argument("--drop-stages", action="store_true",
                            help="also drop the stage payloads (FX graphs, generated kernels, bytecode, IR): "
                                 "they hold names and constants of the model")
        parser.add_argument("--keep-guard-values", action="store_true",
                            help="keep the string values guards compare (G['MODE'] == 'train'); by default each "
                                 "becomes '<value:HASH>' (a string global can hold a key)")
        parser.add_argument("--tree", metavar="DIR",
                            help="the program's tree, whose paths stay (made relative); default: the directory "
                                 "the program was recorded in, unless that is /, a temporary folder or a home")
        parser.add_argument("--source-root", dest="source_roots", action="append", default=[], metavar="DIR",
                            help="also read the program's files under DIR to learn which lines are its source "
                                 "(by default: the current directory)")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.share.bundle import ShareOptions, share_capture
        from dynscope.share.identity import is_tree

        if args.tree is not None and not os.path.isabs(args.tree):
            args.tree = os.path.abspath(args.tree)
        if args.tree is not None and not is_tree(args.tree):
            raise DynscopeError(f"--tree {args.tree}: /, a temporary folder, a home or a system folder is no "
                                "program's tree (every path under it would be kept); give the project's directory")
        for root in args.source_roots:
            if not os.path.isdir(root):
                raise DynscopeError(f"--source-root {root}: not a directory")
        report = share_capture(args.capture, args.output,
                               ShareOptions(args.tree, args.drop_stages, tuple(args.source_roots), args.keep_guard_values))
        _print_report(args.output, report, drop_stages=args.drop_stages, keep_guard_values=args.keep_guard_values)
        return 0


def _print_report(output: str, report, *, drop_stages: bool, keep_guard_values: bool) -> None:
    from dynscope.safe_text import one_line

    paths = report.paths
    lines = [
        f"wrote {output}: {report.events} events, {report.payloads} payloads, {report.size / 1e6:.2f} MB",
        "removed:",
        f"  source text: {report.source_lines} source lines replaced by <source:HASH>"
        f" ({report.source_files_read} of the program's files read to know its lines)",
        f"  paths: {paths['relative']} made relative to {report.tree or 'no tree'}, {paths['site-packages']} "
        f"<site-packages>/..., {paths['stdlib']} <stdlib>/..., {paths['hashed']} outside the tree replaced by <path:HASH>",
        f"  names: {report.names['user']} user names, {report.names['host']} host names, {report.names['secret']} "
        "secrets (--token=..., sk-...) replaced by <user>, <host>, <secret>",
        f"  the run's {', '.join(report.meta_removed) or 'nothing'} (meta)",
    ]
    if report.not_a_tree is not None:
        lines.insert(3, f"  (the recorded directory {report.not_a_tree} is no program's tree: every path outside "
                        "site-packages and the standard library is hashed; --tree DIR keeps a project's paths)")
    if not keep_guard_values:
        lines.append(f"  guard values: {report.guard_values} string values compared in guards replaced by "
                     "'<value:HASH>' (--keep-guard-values keeps them)")
    if report.fields_emptied:
        lines.append("  fields emptied: " + ", ".join(f"{k} ({n})" for k, n in sorted(report.fields_emptied.items())))
    if drop_stages:
        lines.append(f"  stage payloads: {report.stage_payloads_dropped} dropped (--drop-stages)")
    if report.large_payloads_dropped:
        lines.append(f"  {report.large_payloads_dropped} payloads over 32 MB (not read whole, so not scrubbed)")
    lines.append("kept: function, module and tensor names, shapes, guards (their numbers"
                 + (" and strings" if keep_guard_values else "") + "), timings and torch's messages"
                 + ("" if drop_stages else ", and the stage payloads (graphs, kernels, bytecode: names and "
                    "constants of the model; --drop-stages removes them)")
                 + ". Read it before you post it.")
    for line in lines:
        print(one_line(line))
