"""CI against a baseline: the problems a run has that its baseline did not, minus those allowed.

A problem here is one finding a CI system can point at: a file, a line, a title and a message.
The allow file (TOML) accepts known problems, each with a reason::

    [[allow]]
    gb_id = "GB0059"            # and/or
    where = "model.py:212"      # a glob on "file:line" ("model.py:*", "*/utils.py:40")
    reason = "logging in the training loop; fixed in #123"
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Callable
from dataclasses import dataclass

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.compare import Comparison, relative
from dynscope.analysis.names import first_line, friendly_function
from dynscope.analysis.run_view import run_view
from dynscope.errors import DynscopeError
from dynscope.model import Capture, CompileError, Recompile


@dataclass(frozen=True)
class Finding:
    kind: str  # "graph_break" | "recompile" | "error" | "numerics" (sarif.KIND_RULES has a rule for each)
    file: str | None
    line: int | None
    title: str  # "new graph break [GB0059]"
    message: str  # torch's reason, one line
    gb_id: str | None = None
    # What a reader of the finding can do about it (SARIF's rule help): torch's explanation of a
    # break type, its hints and its documentation page, where torch gave them.
    explanation: str | None = None
    hints: tuple[str, ...] = ()
    doc_link: str | None = None
    gb_type: str | None = None
    # The check that found it: "baseline" (new over the baseline) or the limit's option
    # ("max-graph-breaks": one of the problems counted over the limit).
    check: str = "baseline"

    @property
    def where(self) -> str:
        return f"{self.file or '?'}:{self.line}" if self.line is not None else (self.file or "?")

    def compiler_line(self) -> str:
        """``model.py:212: new graph break [GB0059] Failed to trace builtin operator print``"""
        return f"{self.where}: {self.title} {self.message}"


@dataclass(frozen=True)
class Allowance:
    gb_id: str | None
    where: str | None
    reason: str

    def covers(self, finding: Finding) -> bool:
        if self.gb_id is not None and finding.gb_id != self.gb_id:
            return False
        return self.where is None or fnmatch.fnmatchcase(finding.where, self.where)


def new_findings(result: Comparison) -> list[Finding]:
    """What the later run added: breaks, recompiles and compile errors, in that order."""
    cwd = result.after.run.cwd
    return ([break_finding(g, cwd, "new ") for g in result.breaks_added]
            + [recompile_finding(r, cwd, "new ") for r in result.recompiles_added]
            + [error_finding(e, cwd, "new ") for e in result.errors_added])


def break_finding(g: BreakGroup, cwd: str | None, new: str = "", check: str = "baseline") -> Finding:
    tag = f" [{g.gb_id}]" if g.gb_id else ""
    times = f" (×{g.count})" if g.count > 1 and check != "baseline" else ""  # a limit counts occurrences
    return Finding("graph_break", relative(g.location.file, cwd), g.location.line, f"{new}graph break{tag}",
                   first_line(g.headline) + times, g.gb_id, explanation=g.explanation, hints=g.hints,
                   doc_link=g.doc_link, gb_type=g.gb_type, check=check)


def recompile_finding(r: Recompile, cwd: str | None, new: str = "", check: str = "baseline") -> Finding:
    failure = r.failures[0] if r.failures else None
    guard = failure.guard if failure and failure.guard else first_line(r.reason)
    return Finding("recompile", relative(r.file, cwd), r.line, f"{new}recompile of {friendly_function(r.function)}",
                   f"guard failed: {guard}", check=check)


def error_finding(e: CompileError, cwd: str | None, new: str = "", check: str = "baseline") -> Finding:
    return Finding("error", relative(e.user_file or e.file, cwd), e.user_line or e.line,
                   f"{new}compile error in {friendly_function(e.function)}", f"{e.fail_type}: {first_line(e.reason)}",
                   check=check)


# What a limit counts, one finding per problem at its place: the producers of ``check``'s limits
# (``--max-graph-breaks``...), by the limit's name in ``check``. A new limit on problems with a place
# (numerics suspects) is one more entry; a limit on a run-wide figure (cache misses, compile
# seconds) has none: it is a notification of the run, not a place in the code.
@dataclass(frozen=True)
class LimitFindings:
    option: str  # the limit's option without its dashes: the findings' ``check``
    findings: Callable[[Capture, str], list[Finding]]  # (capture, option) -> every problem the limit counts


def graph_break_findings(capture: Capture, check: str) -> list[Finding]:
    return [break_finding(g, capture.run.cwd, check=check) for g in run_view(capture).break_groups]


def recompile_findings(capture: Capture, check: str) -> list[Finding]:
    return [recompile_finding(r, capture.run.cwd, check=check) for r in capture.recompiles()]


def error_findings(capture: Capture, check: str) -> list[Finding]:
    return [error_finding(e, capture.run.cwd, check=check) for e in capture.errors()]


def numerics_findings(capture: Capture, check: str) -> list[Finding]:
    """Each numerics suspect of a `dynscope numerics` capture, at the user's line it comes from."""
    from dynscope.model.numerics import node_site

    view = run_view(capture).numerics
    found = []
    for node in view.numerics.suspects if view is not None else []:
        site = node_site(node)
        found.append(Finding("numerics", relative(site.file, capture.run.cwd), site.line,
                             f"numerics suspect {node.node} ({node.op})",
                             f"compiled error {node.compiled_error:.3g} against eager's {node.eager_error:.3g}",
                             check=check))
    return found


LIMIT_FINDINGS: dict[str, LimitFindings] = {
    "graph breaks": LimitFindings("max-graph-breaks", graph_break_findings),
    "recompiles": LimitFindings("max-recompiles", recompile_findings),
    "compile errors": LimitFindings("max-errors", error_findings),
    "numerics suspects": LimitFindings("max-numerics-suspects", numerics_findings),
}


# An allow file lists a few accepted problems; anything bigger is not one (and is not read whole).
MAX_ALLOW_FILE_BYTES = 1 << 20


def _read_allow_file(path: str) -> bytes:
    """The file's bytes: a regular file of at most MAX_ALLOW_FILE_BYTES (a FIFO would block
    and a device never ends: refused before they are opened)."""
    import os
    import stat

    from dynscope.store.lock import file_kind

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise DynscopeError(f"cannot read the allow file {path}: it is {file_kind(os.stat(path).st_mode)}")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped after the check
                raise DynscopeError(f"cannot read the allow file {path}: it is not a regular file")
            raw = f.read(MAX_ALLOW_FILE_BYTES + 1)
    except OSError as e:
        raise DynscopeError(f"cannot read the allow file {path}: {e.strerror}") from None
    if len(raw) > MAX_ALLOW_FILE_BYTES:
        raise DynscopeError(f"the allow file {path} is larger than {MAX_ALLOW_FILE_BYTES >> 20} MiB: "
                            "it is not an allow file")
    return raw


def load_allowances(path: str) -> list[Allowance]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]  # a dependency on 3.10 only
    raw = _read_allow_file(path)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise DynscopeError(f"{path} is not valid TOML: it is not UTF-8 text (byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise DynscopeError(f"{path} is not valid TOML: {e}") from None
    except RecursionError:
        raise DynscopeError(f"{path} is not a usable allow file: its tables or arrays nest too deeply") from None
    entries = data.get("allow", [])
    if not isinstance(entries, list):
        raise DynscopeError(f"{path}: 'allow' must be a list of [[allow]] tables")
    allowances = []
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise DynscopeError(f"{path}: [[allow]] entry {i} is not a table")
        gb_id, where, reason = entry.get("gb_id"), entry.get("where"), entry.get("reason")
        if gb_id is None and where is None:
            raise DynscopeError(f"{path}: [[allow]] entry {i} needs gb_id and/or where")
        if not isinstance(reason, str) or not reason.strip():
            raise DynscopeError(f"{path}: [[allow]] entry {i} needs a reason")
        if not all(v is None or isinstance(v, str) for v in (gb_id, where)):
            raise DynscopeError(f"{path}: [[allow]] entry {i}: gb_id and where are strings")
        allowances.append(Allowance(gb_id, where, reason))
    return allowances
