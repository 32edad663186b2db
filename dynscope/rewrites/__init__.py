"""Source rewrites that remove a graph break: the catalogue ``dynscope fix`` tries in a shadow.

A rewrite reads one file's source and the break torch recorded in it (``BreakSite``), and
returns the whole file rewritten (``Rewrite``), or nothing when its pattern is not there.
Each rule is a ``libcst`` transform, so formatting and comments survive and the diff a user
reads is the change and nothing else. Rules never import torch and never run the code they
read: they are text to text, tested on real snippets in tests/unit/test_rewrites.py, and
proven (or not) by ``dynscope fix``'s re-runs.

The catalogue (``RULES``, in dynscope/rewrites/catalogue.py) is tried in order; every rule
that matches gives one candidate, and fix keeps the ones whose trial removes the break with
equal outputs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BreakSite:
    """Where and why torch broke the graph, as the capture recorded it."""

    line: int  # 1-based line of the break in this file
    gb_type: str  # torch's graph-break type ("Unsupported Tensor.item() call", ...); "" when not recorded
    reason: str  # torch's explanation (may be several lines)
    function: str | None = None  # the function the line is in, when recorded
    # a line that called into the break (a frame above it), not the break's own: only the escape hatches answer,
    # on the function around it (the break's own function could not take one)
    caller: bool = False


@dataclass(frozen=True)
class Rewrite:
    """One candidate change to one file."""

    rule: str  # the catalogue entry's name, e.g. "guard-print"
    title: str  # the change in one line, as fix's table shows it
    cause: str  # the break's real cause in words (torch's label can hide it)
    line: int  # the line the change is anchored at (for messages and row keys)
    source: str  # the whole file, rewritten
    # torch._dynamo.config flags the change needs on (True) to remove the break: check-size helps only
    # once scalar capture keeps the number in the graph; a trial sets them with the rewrite
    settings: tuple[str, ...] = ()
    # the change runs the breaking code in eager (torch.compiler.disable) rather than making it traceable:
    # fix calls a break it removes while the graphs do not fall "moved to eager"
    leaves_graph: bool = False
    # an escape hatch (dynscope/rewrites/hatches.py): the breaking function stays in the graph as one opaque
    # call; fix tries it as a fallback, only where no specific rule or setting fixed the break
    opaque: bool = False


@dataclass(frozen=True)
class Offers:
    """What the escape hatches may use: the decorators the installed torch has (recorded by the child,
    probes/compat.remedy_features: "nonstrict_trace", "leaf_function", "custom_op"), and the names of the functions
    the program gave torch.compile (a hatch on one of those would make the whole compiled call opaque)."""

    hatches: frozenset[str] = frozenset()
    compiled: frozenset[str] = frozenset()
    # the first lines of those functions in this file, where recorded: then they, not the names, say which
    # function was compiled (a module's forward and its submodules' forwards share a name)
    compiled_lines: frozenset[int] = frozenset()
