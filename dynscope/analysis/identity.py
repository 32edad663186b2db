"""A graph break's identity across edits, and the matching of two runs' breaks by it.

A careful reader matches a break of yesterday's run with one of today's by what it is, never by
its line number: the same kind of break (torch's id or type) in the same function (qualified
name; a resume function ``torch_dynamo_resume_in_forward_at_21`` is ``forward``), on a line
with the same code and the same code around it, in the same order among the function's breaks.
Lines added above it, a comment, ``ruff format``, a function moved or a neighbour renamed
change none of those. Code is compared normalised: without whitespace, comments, trailing
commas or a quote style (see ``normalised``).

Matching goes from the surest evidence to the weakest, each tier pairing only what the tiers
before it left (``TIERS``); a break no tier pairs is new (or gone). Old captures recorded before
dynscope kept the qualified name and the neighbours still match on what they have.
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import re
import tokenize
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from dynscope.analysis.breaks import BreakGroup

RESUME_PREFIX = "torch_dynamo_resume_in_"
_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<function>.+)_at_\d+$")
_SPACE = re.compile(r"\s+")
_TRAILING_COMMA = re.compile(r",(?=[)\]}])")
_PARENS = re.compile(r"[()]")
# Code this similar after normalising is the same line rewritten (``ruff format`` splitting a
# call over lines leaves its first line); below it, a different line.
SIMILAR = 0.6

Place = Callable[[str | None, str | None], str | None]  # a file as the comparison names it (compare._place)


def origin_function(name: str | None) -> str | None:
    """The function a resume function continues (``torch_dynamo_resume_in_forward_at_21`` ->
    ``forward``, nested ones too); any other name as it is."""
    while name:
        match = _RESUME.match(name)
        if match is None:
            break
        name = match["function"]
    return name


def origin_qualname(name: str | None) -> str | None:
    """A qualified name with its last part's resume naming undone (``Block.torch_dynamo_resume_in_forward_at_21``)."""
    if not name:
        return name
    head, dot, last = name.rpartition(".")
    return f"{head}{dot}{origin_function(last)}"


def normalised(code: str | None) -> str:
    """Code (a line or a statement's lines) as a diff that ignores formatting sees it: no comments,
    no whitespace, no trailing commas, no parentheses (a formatter adds them to split a line), one
    quote style. Empty for no code."""
    if not code:
        return ""
    text = "".join(_without_comment(line.strip()) for line in code.splitlines())
    text = _SPACE.sub("", text).replace("'", '"')
    return _PARENS.sub("", _TRAILING_COMMA.sub("", text))


def _without_comment(code: str) -> str:
    """``code`` without its ``#`` comment (a ``#`` inside a string stays)."""
    if "#" not in code:
        return code
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.COMMENT:
                return code[:token.start[1]]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # an unfinished line (``foo(a,``): its comment found before the error, or none
    return code


@dataclass(frozen=True)
class BreakIdentity:
    """What a break is, whatever line it is on."""

    file: str | None  # as the comparison names it (relative to the run's directory)
    function: str | None  # the code object's name, resume naming undone
    qualname: str | None  # the qualified name, where the capture recorded it
    kind: str  # torch's id (GB0059), else its type, else the headline
    code: str  # its statement (else its line), normalised
    context: tuple[str, ...]  # the nearest statements (old captures: lines) above, nearest first, then below
    line: int | None  # where it is today: shown, and used only to break ties
    order: int  # its place among its function's breaks, by line

    def same_function(self, other: BreakIdentity) -> bool:
        if (self.file, self.function, self.kind) != (other.file, other.function, other.kind):
            return False
        if self.qualname and other.qualname:  # both captures know it: two classes' forward differ
            return origin_qualname(self.qualname) == origin_qualname(other.qualname)
        return True


def identities(groups: list[BreakGroup], place: Place, cwd: str | None) -> list[BreakIdentity]:
    """Each group's identity, in the groups' order."""
    found = []
    for g in groups:
        loc = g.location
        context = tuple(normalised(t) for t in (*loc.above, "", *loc.below))  # "" parts above from below
        found.append(BreakIdentity(place(loc.file, cwd), origin_function(loc.function), loc.qualname, kind(g),
                                   normalised(loc.statement or loc.code), context if any(context) else (), loc.line, 0))
    # Order among the function's breaks: by line, then kind (two breaks on one line).
    by_function: dict[tuple[str | None, str | None], list[int]] = {}
    for i, b in enumerate(found):
        by_function.setdefault((b.file, b.function), []).append(i)
    for members in by_function.values():
        for n, i in enumerate(sorted(members, key=lambda i: (found[i].line or 0, found[i].kind))):
            found[i] = dataclasses.replace(found[i], order=n)
    return found


def kind(g: BreakGroup) -> str:
    return g.gb_id or g.gb_type or g.headline


# -- matching ----------------------------------------------------------------------------------

Tier = Callable[[BreakIdentity, BreakIdentity], bool]


def _same_line(a: BreakIdentity, b: BreakIdentity) -> bool:  # nothing moved (also: no code recorded)
    return a.line == b.line and a.code == b.code


def _same_code_and_context(a: BreakIdentity, b: BreakIdentity) -> bool:
    return bool(a.code) and a.code == b.code and a.context == b.context


def _same_code(a: BreakIdentity, b: BreakIdentity) -> bool:
    return bool(a.code) and a.code == b.code


def _same_context(a: BreakIdentity, b: BreakIdentity) -> bool:  # the line itself rewritten
    return bool(a.context) and a.context == b.context


def _similar_code(a: BreakIdentity, b: BreakIdentity) -> bool:
    return bool(a.code and b.code) and difflib.SequenceMatcher(None, a.code, b.code).ratio() >= SIMILAR


def _same_line_rewritten(a: BreakIdentity, b: BreakIdentity) -> bool:
    """The line edited in place (or its text withheld: a shared bundle's ``<source:HASH>``)."""
    return a.line is not None and a.line == b.line


def _no_code(a: BreakIdentity, b: BreakIdentity) -> bool:
    """Neither capture has the line's text (an imported log): the function's n-th break of a kind."""
    return not a.code and not b.code and a.order == b.order


TIERS: tuple[Tier, ...] = (_same_line, _same_code_and_context, _same_code, _same_context, _similar_code,
                          _same_line_rewritten, _no_code)


@dataclass(frozen=True)
class BreakMatch:
    pairs: list[tuple[BreakGroup, BreakGroup]]  # (before, after): the same break, moved or not
    moved: list[tuple[BreakGroup, BreakGroup]]  # those of the pairs at another line or file
    added: list[BreakGroup]  # after's breaks nothing matched
    removed: list[BreakGroup]  # before's breaks nothing matched


def match_breaks(before: list[BreakGroup], after: list[BreakGroup], place: Place,
                 cwd_before: str | None, cwd_after: str | None) -> BreakMatch:
    ids_a = identities(before, place, cwd_before)
    ids_b = identities(after, place, cwd_after)
    free_a = set(range(len(before)))
    pairs: dict[int, int] = {}  # after index -> before index
    for tier in TIERS:
        for j in range(len(after)):
            if j in pairs:
                continue
            b = ids_b[j]
            candidates = [i for i in free_a if ids_a[i].same_function(b) and tier(ids_a[i], b)]
            if not candidates:
                continue
            # Several alike (the same line twice): the nearest in order, then in line.
            best = min(candidates, key=lambda i: (abs(ids_a[i].order - b.order),
                                                  abs((ids_a[i].line or 0) - (b.line or 0)), i))
            pairs[j] = best
            free_a.discard(best)
    matched = [(pairs[j], j) for j in range(len(after)) if j in pairs]
    return BreakMatch(
        pairs=[(before[i], after[j]) for i, j in matched],
        # The file as the comparison names it: the same file in two checkouts has not moved.
        moved=[(before[i], after[j]) for i, j in matched if (ids_a[i].line, ids_a[i].file) != (ids_b[j].line, ids_b[j].file)],
        added=[g for j, g in enumerate(after) if j not in pairs],
        removed=[g for i, g in enumerate(before) if i in free_a],
    )


# -- frames --------------------------------------------------------------------------------------

FrameIdentity = Callable[[str | None], Hashable]  # a compiled frame's function name -> what it is


def frame_identities(match: BreakMatch) -> tuple[FrameIdentity, FrameIdentity]:
    """What each run's compiled frames are, comparable across the two runs.

    A function is itself. A resume function is named by torch after the line of the break it
    resumes after (``torch_dynamo_resume_in_forward_at_21``), so it is known by that break's
    identity instead: the resume functions after two matched breaks are the same frame, wherever
    the lines went. One whose break the capture does not know is its function's, resumed."""
    tokens_a: dict[int, Hashable] = {}
    tokens_b: dict[int, Hashable] = {}
    for n, (a, b) in enumerate(match.pairs):
        tokens_a[id(a)] = tokens_b[id(b)] = ("break", n)
    for n, g in enumerate(match.removed):
        tokens_a[id(g)] = ("gone", n)
    for n, g in enumerate(match.added):
        tokens_b[id(g)] = ("new", n)
    return (_frame_identity([a for a, _ in match.pairs] + match.removed, tokens_a),
            _frame_identity([b for _, b in match.pairs] + match.added, tokens_b))


def _frame_identity(groups: list[BreakGroup], tokens: dict[int, Hashable]) -> FrameIdentity:
    resumes: dict[str, Hashable] = {}
    for g in groups:
        for name in g.resumed_into:
            resumes.setdefault(name, tokens[id(g)])

    def identity(function: str | None) -> Hashable:
        if function is None or not function.startswith(RESUME_PREFIX):
            return ("function", function)
        return ("resumed", origin_function(function), resumes.get(function))

    return identity
