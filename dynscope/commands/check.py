"""dynscope check: fail a CI job on what a run added over its baseline, or on more than allowed.

Exit 0: pass; 1: new problems or a limit exceeded; 2: bad input, an incomplete capture among them
(a recording cut by a full disk or a killed recorder fails whatever the thresholds). Findings print as
compiler-style lines (``model.py:212: new graph break [GB0059] ...``) that editors and CI logs
link, as GitHub Actions annotations (``--format github``) or as one SARIF 2.1.0 log for code-scanning
dashboards (``--format sarif``, dynscope/reporters/sarif.py); ``--junit`` also writes JUnit XML.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dynscope.errors import DynscopeError

if TYPE_CHECKING:
    from dynscope.reporters.sarif import SarifFinding, SarifNotice

# Exit status when a check fails (2 is taken by bad input, as everywhere in dynscope).
LIMIT_EXCEEDED = 1

CACHES_OFF = "caches were off while recording (explain without --cold, or --warm, shows them)"
_KINDS = {"graph_break": "graph breaks", "recompile": "recompiles", "error": "compile errors"}


@dataclass
class CaseResult:
    """One JUnit test case: one kind of check on one capture."""

    name: str
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)  # a failed limit's problems, one line each


class Command:
    name = "check"
    help = ("fail (exit 1) on problems a run added over --baseline, or above --max-graph-breaks / "
            "--max-recompiles / --max-errors / --max-cache-misses / --max-numerics-suspects, or below "
            "--min-speedup (for CI)")

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("captures", nargs="+", metavar="CAPTURE", help=".dynscope capture files (every rank counts)")
        parser.add_argument("--baseline", nargs="+", metavar="BASE",
                            help="the captures to compare with (e.g. main's), one per CAPTURE, in the same order")
        parser.add_argument("--allow", metavar="FILE", help="TOML file of accepted problems ([[allow]] gb_id / where, reason)")
        parser.add_argument("--max-graph-breaks", type=_count, metavar="N", help="graph breaks allowed (occurrences)")
        parser.add_argument("--max-recompiles", type=_count, metavar="M", help="recompiles allowed")
        parser.add_argument("--max-errors", type=_count, metavar="K",
                            help="compile errors allowed (compiles that failed the program or its backend; "
                                 "frames Dynamo gave up on and ran in eager are not errors)")
        parser.add_argument("--max-cache-misses", type=_count, metavar="N",
                            help="compile-cache misses allowed (every layer's: AOTAutograd, Inductor FX graph, ...; "
                                 "only a run recorded with caches on logs them: explain without --cold, or --warm); "
                                 "with --baseline, a run with more misses than its baseline fails too")
        parser.add_argument("--max-compile-seconds", type=_seconds, metavar="S",
                            help="compile time allowed, in seconds (every compile, backward graphs included)")
        parser.add_argument("--max-compile-increase", type=_fraction, metavar="F",
                            help="with --baseline: compile time allowed over the baseline's, as a fraction "
                                 "(0.25: at most 25%% more)")
        parser.add_argument("--max-numerics-suspects", type=_count, metavar="N",
                            help="numerics suspects allowed (nodes where compiled and eager part ways; the capture of "
                                 "a `dynscope numerics -o CAPTURE` run); a failure names each suspect's line")
        parser.add_argument("--min-speedup", type=_speedup, metavar="X",
                            help="compiled speed at least X times eager's (the capture of an `explain --vs-eager` "
                                 "run; 1.0: never slower than eager)")
        parser.add_argument("--format", choices=("text", "github", "sarif"), default="text",
                            help="text: compiler-style lines; github: GitHub Actions annotations; "
                                 "sarif: one SARIF 2.1.0 log on stdout (code scanning)")
        parser.add_argument("--junit", metavar="PATH", help="also write the results as JUnit XML")

    def run(self, args: argparse.Namespace) -> int:
        from dynscope.model import Capture

        limits = {"graph breaks": args.max_graph_breaks, "recompiles": args.max_recompiles,
                  "compile errors": args.max_errors, "cache misses": args.max_cache_misses}
        if args.max_compile_increase is not None and args.baseline is None:
            raise DynscopeError("--max-compile-increase compares with a baseline: give --baseline BASE")
        if (args.baseline is None and all(limit is None for limit in limits.values()) and args.max_compile_seconds is None
                and args.max_numerics_suspects is None and args.min_speedup is None):
            raise DynscopeError("give at least one limit (--max-graph-breaks N, --max-recompiles M, --max-errors K, "
                                "--max-cache-misses N, --max-compile-seconds S, --max-numerics-suspects N or "
                                "--min-speedup X) or a --baseline capture to compare with")
        if args.baseline is not None and len(args.baseline) != len(args.captures):
            raise DynscopeError(f"give one --baseline capture per capture ({len(args.captures)} captures, "
                                f"{len(args.baseline)} baselines), in the same rank order")
        allowances = []
        if args.allow:
            from dynscope.analysis.baseline import load_allowances

            allowances = load_allowances(args.allow)
        out = _Output(args.format)
        suites: dict[str, list[CaseResult]] = {}
        with ExitStack() as stack:
            captures = [stack.enter_context(Capture.open(path)) for path in args.captures]
            bases = [stack.enter_context(Capture.open(path)) for path in args.baseline or ()]
            for capture in captures + bases:
                _refuse_incomplete(capture)
            for i, (path, capture) in enumerate(zip(args.captures, captures)):
                cases = suites.setdefault(path, [])
                out.capture = path
                if bases:
                    cases += _against_baseline(capture, bases[i], allowances, out)
                cases += _within_limits(path, capture, limits, out)
                cases += _compile_time_limits(path, capture, bases[i] if bases else None, args.max_compile_seconds,
                                              args.max_compile_increase, out)
                if args.max_numerics_suspects is not None:
                    cases.append(_numerics_limit(path, capture, args.max_numerics_suspects, out))
                if args.min_speedup is not None:
                    cases.append(_speedup_limit(path, capture, args.min_speedup, out))
        failed = sum(len(c.failures) for cases in suites.values() for c in cases)
        out.summary(failed)
        if args.junit:
            _write_junit(args.junit, suites)
        sys.stdout.flush()
        return LIMIT_EXCEEDED if failed else 0


def _refuse_incomplete(capture) -> None:
    """A cut recording (a full disk, a killed recorder) holds only part of the run: its counts
    are a lower bound, so no limit can pass it, whatever the thresholds."""
    if capture.run.incomplete:
        raise DynscopeError(f"{capture.path} is an incomplete capture: {capture.run.incomplete}; "
                            "a cut run cannot pass a check (record it again)")


def _against_baseline(capture, base, allowances, out: _Output) -> list[CaseResult]:
    from dynscope.analysis.baseline import new_findings
    from dynscope.analysis.changes import comparison_warnings
    from dynscope.analysis.compare import compare

    cases = {kind: CaseResult(f"no new {name}") for kind, name in _KINDS.items()}
    comparison = compare(base, capture)
    for warning in comparison_warnings(comparison):  # entry scripts or backends differ: said, not failed
        out.warning(f"{capture.path}: {warning}")
    for finding in new_findings(comparison):
        allowed = next((a for a in allowances if a.covers(finding)), None)
        case = cases[finding.kind]
        if allowed is not None:
            case.notes.append(f"{finding.compiler_line()} (allowed: {allowed.reason})")
            out.allowed(finding, allowed.reason)
        else:
            case.failures.append(finding.compiler_line())
            out.finding(finding)
    return list(cases.values()) + _new_cache_misses(capture.path, comparison.caches, out)


def _new_cache_misses(path: str, caches, out: _Output) -> list[CaseResult]:
    """More cache misses than the baseline (a run that kept its caches), with the key components
    that changed. Nothing to check when neither run logged a cache lookup."""
    if caches is None:
        return []
    case = CaseResult("no new cache misses")
    before, after = caches.before["miss"], caches.after["miss"]
    changed = f"; key components changed: {', '.join(caches.components[:5])}" if caches.components else ""
    line = f"{path}: {after} cache misses (baseline: {before}){changed}"
    if after > before:
        case.failures.append(line)
    out.limit(path, line, failed=after > before)
    return [case]


def _within_limits(path: str, capture, limits: dict[str, int | None], out: _Output) -> list[CaseResult]:
    from dynscope.analysis.baseline import LIMIT_FINDINGS
    from dynscope.analysis.run_view import run_view

    view = run_view(capture)
    t = view.totals
    found = {"graph breaks": t.graph_breaks, "recompiles": t.recompiles, "compile errors": t.errors,
             "cache misses": view.caches.misses}
    cases = []
    for what, limit in limits.items():
        if limit is None:
            continue
        case = CaseResult(f"at most {limit} {what}")
        line = f"{path}: {found[what]} {what} (at most {limit} allowed)"
        if what == "cache misses" and not view.caches.kept:  # 0 of nothing: say so rather than pass quietly
            line += f"; {CACHES_OFF}"
        if found[what] > limit:
            case.failures.append(line)
        out.limit(path, line, failed=found[what] > limit)
        if found[what] > limit and what in LIMIT_FINDINGS:  # each problem counted, at its place
            rule = LIMIT_FINDINGS[what]
            for finding in rule.findings(capture, rule.option):
                case.details.append(finding.compiler_line())
                out.finding(finding)
        cases.append(case)
    return cases


def _compile_time_limits(path: str, capture, base, max_seconds: float | None, max_increase: float | None,
                         out: _Output) -> list[CaseResult]:
    """Compile seconds against an absolute limit and against the baseline's (a stated fraction more)."""
    from dynscope.analysis.run_view import run_view

    seconds = run_view(capture).totals.compile_time_s
    cases = []
    if max_seconds is not None:
        case = CaseResult(f"at most {max_seconds:g} s compiling")
        line = f"{path}: {seconds:.2f} s compiling (at most {max_seconds:g} s allowed)"
        if seconds > max_seconds:
            case.failures.append(line)
        out.limit(path, line, failed=seconds > max_seconds)
        cases.append(case)
    if max_increase is not None and base is not None:
        before = run_view(base).totals.compile_time_s
        allowed = before * (1 + max_increase)
        case = CaseResult(f"compile time at most {max_increase:.0%} over the baseline")
        change = f"{(seconds - before) / before:+.0%}" if before > 0 else "from none"
        line = (f"{path}: {seconds:.2f} s compiling, {change} against the baseline's {before:.2f} s "
                f"(at most {max_increase:.0%} more allowed)")
        if seconds > allowed:
            case.failures.append(line)
        out.limit(path, line, failed=seconds > allowed)
        cases.append(case)
    return cases


def _numerics_limit(path: str, capture, limit: int, out: _Output) -> CaseResult:
    """Suspect nodes of a `dynscope numerics` capture against a limit; each suspect named at its line."""
    from dynscope.analysis.baseline import numerics_findings
    from dynscope.analysis.run_view import run_view

    numerics = run_view(capture).numerics
    if numerics is None:
        raise DynscopeError(f"{path} holds no numerics check, so --max-numerics-suspects cannot judge it "
                            "(record one with: dynscope numerics -o CAPTURE SCRIPT)")
    suspects = numerics.numerics.suspects
    case = CaseResult(f"at most {limit} numerics suspects")
    line = f"{path}: {len(suspects)} numerics suspects (at most {limit} allowed)"
    failed = len(suspects) > limit
    findings = numerics_findings(capture, "max-numerics-suspects") if failed else []
    if failed:
        case.failures.extend(f.compiler_line() for f in findings)
        line += "; " + "; ".join(case.failures)
    out.limit(path, line, failed=failed)
    for finding in findings:  # each suspect at its line: a SARIF result, a GitHub annotation
        out.finding(finding)
    return case


def _speedup_limit(path: str, capture, minimum: float, out: _Output) -> CaseResult:
    """The compiled run's speed against eager's (an `explain --vs-eager` capture) against a minimum."""
    from dynscope.analysis.run_view import run_view

    v = run_view(capture).vs_eager
    if v is None:
        raise DynscopeError(f"{path} has no eager run to compare with, so --min-speedup cannot judge it "
                            "(record it with: dynscope explain --vs-eager SCRIPT)")
    if not v.comparable or v.speedup is None:
        raise DynscopeError(f"{path}: the compiled and eager runs are not comparable ({v.why_not}), "
                            "so --min-speedup cannot judge it")
    case = CaseResult(f"at least {minimum:g}x eager's speed")
    line = f"{path}: compiled ran at {v.speedup:.2f}x eager's speed (at least {minimum:g}x required)"
    if v.break_even_calls is None:
        line += "; compiling never pays back"
    failed = v.speedup < minimum
    if failed:
        case.failures.append(line)
    out.limit(path, line, failed=failed)
    return case


class _Output:
    def __init__(self, form: str) -> None:
        from dynscope.safe_text import one_line

        self.form = form
        self.capture = ""  # the capture whose findings come next (SARIF names it in each result)
        self.sarif_findings: list[SarifFinding] = []
        self.sarif_notices: list[SarifNotice] = []
        # One finding, one line: a capture's newline must not forge a line of its own in a CI log
        # (such as "dynscope check: ok").
        self.visible = one_line

    def finding(self, finding) -> None:
        if self.form == "sarif":
            from dynscope.reporters.sarif import SarifFinding

            self.sarif_findings.append(SarifFinding(finding, self.capture))
        elif self.form == "github":
            print(_annotation("error", finding.title, finding.message, finding.file, finding.line))
        else:
            print(self.visible(finding.compiler_line()))

    def allowed(self, finding, reason: str) -> None:
        if self.form == "sarif":
            from dynscope.reporters.sarif import SarifFinding

            self.sarif_findings.append(SarifFinding(finding, self.capture, allowed=reason))
        elif self.form == "github":
            print(_annotation("notice", f"allowed: {finding.title}", f"{finding.message} ({reason})",
                              finding.file, finding.line))
        else:
            print(self.visible(f"{finding.compiler_line()} (allowed: {reason})"))

    def warning(self, text: str) -> None:
        """What makes a comparison less telling (different entry scripts or backends): said, never failed."""
        if self.form == "sarif":
            from dynscope.reporters.sarif import SarifNotice

            self.sarif_notices.append(SarifNotice(text, failed=False, level="warning"))
        elif self.form == "github":
            print(_annotation("warning", "dynscope check", text, None, None))
        else:
            print(self.visible(f"warning: {text}"))

    def limit(self, path: str, line: str, *, failed: bool) -> None:
        if self.form == "sarif":
            from dynscope.reporters.sarif import SarifNotice

            self.sarif_notices.append(SarifNotice(line, failed))
        elif self.form == "github" and failed:
            print(_annotation("error", "dynscope check", line, None, None))
        elif self.form == "text":
            print(self.visible(f"{line}: {'FAIL' if failed else 'ok'}"))

    def summary(self, failed: int) -> None:
        if self.form == "sarif":
            from dynscope.reporters.sarif import sarif_text

            sys.stdout.write(sarif_text(self.sarif_findings, self.sarif_notices))
        elif self.form == "text":
            print(f"dynscope check: {'FAIL' if failed else 'ok'} ({failed} problem{'' if failed == 1 else 's'})")


def _annotation(level: str, title: str, message: str, file: str | None, line: int | None) -> str:
    """A GitHub Actions workflow command (its escaping rules for data and for properties, in
    dynscope.safe_text with every other output's)."""
    from dynscope.safe_text import github_data, github_property

    props = [f"title={github_property(title)}"]
    if file:
        props.insert(0, f"file={github_property(file)}")
        if line is not None:
            props.insert(1, f"line={github_property(str(line))}")
    return f"::{level} {','.join(props)}::{github_data(message)}"


def _write_junit(path: str, suites: dict[str, list[CaseResult]]) -> None:
    import xml.etree.ElementTree as ET

    from dynscope.safe_text import visible

    root = ET.Element("testsuites", name="dynscope check")
    for capture, cases in suites.items():
        failures = sum(1 for c in cases if c.failures)
        suite = ET.SubElement(root, "testsuite", name=visible(capture), tests=str(len(cases)), failures=str(failures))
        for case in cases:
            element = ET.SubElement(suite, "testcase", classname="dynscope", name=visible(case.name))
            if case.failures:
                failure = ET.SubElement(element, "failure", message=visible(case.failures[0]))
                failure.text = visible("\n".join(case.failures + case.details))
            if case.notes:
                ET.SubElement(element, "system-out").text = visible("\n".join(case.notes))
    try:
        ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    except OSError as e:
        raise DynscopeError(f"cannot write {path}: {e.strerror}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds: {text}")
    return value


def _speedup(text: str) -> float:
    """A speed ratio against eager: 1.0 is as fast, 1.2 is 20% faster."""
    try:
        value = float(text[:-1] if text.endswith(("x", "×")) else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a speed ratio (1.0, 1.2x): {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0: {text}")
    return value


def _fraction(text: str) -> float:
    """A fraction (0.25) or a percentage (25%)."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a fraction (0.25) or a percentage (25%): {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {value}")
    return value
