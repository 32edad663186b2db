"""Read the parts of torch's graph-break message back out of its text.

Torch (>= 2.7) formats every graph break with ``format_graph_break_message``::

    <gb_type>
      Explanation: <explanation, continuation lines indented 4>
      Hint: <hint>
      Hint: <hint>

      Developer debug context: <context>

     For more details about this graph break, please visit: <link>

Older torch wrote free text; then the whole message is the explanation.

When a second break happens while torch handles the first (a break inside a for/while loop
makes the whole frame fall back to eager: "graph break in loop"), torch chains the messages
with "*** While handling this graph break, another graph break occurred: ***". The first
message is the root cause, at the place the user must change; the later ones say what torch
did about it (``chained``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def first_line(text: str | None) -> str:
    """The first line of a message that is not blank, stripped ("" when there is none): the one
    definition every view and analysis uses for a one-line form of torch's texts."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


_CHAINED = "*** While handling this graph break, another graph break occurred: ***"
_LINK = re.compile(r"For more details about this graph break, please visit:\s*(\S+)")
_FIELD = re.compile(r"^  (Explanation|Hint|Developer debug context|Higher Order Operator): ?", re.MULTILINE)


@dataclass(frozen=True)
class BreakText:
    headline: str
    explanation: str | None
    hints: tuple[str, ...]
    developer_context: str | None
    doc_link: str | None
    chained: tuple[str, ...] = ()  # headlines of the breaks torch hit while handling this one


def parse_break_message(message: str) -> BreakText:
    cause, *later = message.split(_CHAINED)
    parsed = _parse_one(cause)
    if not later:
        return parsed
    chained = tuple(_parse_one(part).headline for part in later)
    return BreakText(parsed.headline, parsed.explanation, parsed.hints, parsed.developer_context, parsed.doc_link,
                     chained)


# What torch did beyond splitting the graph, read from its reason's preamble (log_graph_break's
# callers in symbolic_convert.py) and from the breaks it chained.
_SKIPPED_WHOLE = "Failed to handle graph break gracefully"
_SKIPPED_REST = "Encountered graph break that we cannot resume from"
_LOOP = "graph break in loop"


def break_consequence(reason: str, chained: tuple[str, ...], skip_frame: bool) -> tuple[str | None, bool]:
    """(what the break cost beyond a split graph, in words; whether the frame fell back to eager)."""
    whole = reason.startswith(_SKIPPED_WHOLE) or skip_frame
    if _LOOP in chained:
        return "inside a loop: the whole frame fell back to eager", True
    if whole:
        return "Dynamo could not resume after it: the whole frame fell back to eager", True
    if reason.startswith(_SKIPPED_REST):
        return "Dynamo could not resume after it: the rest of the frame ran in eager", False
    if chained:
        return f"then: {chained[-1]}", False
    return None, False


def gb_id_from_link(link: str | None) -> str | None:
    """'.../gb/gb0033.html' -> 'GB0033' (torch links each break type's page by its id)."""
    match = _GB_ID.search(link or "")
    return f"GB{int(match.group(1)):04d}" if match else None


def _parse_one(message: str) -> BreakText:
    text = message.strip("\n")
    link_match = _LINK.search(text)
    doc_link = link_match.group(1) if link_match else None
    if link_match:
        text = text[: link_match.start()].rstrip()
    headline, _, rest = text.partition("\n")
    fields = list(_FIELD.finditer(rest))
    if not fields:
        return BreakText(headline.strip(), rest.strip() or None, (), None, doc_link)
    explanation = context = None
    hints: list[str] = []
    for i, match in enumerate(fields):
        end = fields[i + 1].start() if i + 1 < len(fields) else len(rest)
        value = _unindent(rest[match.end() : end])
        kind = match.group(1)
        if kind == "Explanation":
            explanation = value
        elif kind == "Hint":
            hints.append(value)
        elif kind == "Developer debug context":
            context = value
    return BreakText(headline.strip(), explanation, tuple(hints), context, doc_link)


def _unindent(value: str) -> str:
    lines = value.strip("\n").split("\n")
    out = [lines[0].strip()]
    for line in lines[1:]:
        out.append(line[4:] if line.startswith("    ") else line.strip())
    return "\n".join(out).strip()


# torch's dynamo_graph_break_reason artifact (symbolic_convert.log_graph_break), as TORCH_TRACE logs it.
_ARTIFACT_HEAD = re.compile(r"^Graph break in user code at (?P<file>.+):(?P<line>\d+)\n")
# The preambles log_graph_break's callers put before the exception's message (symbolic_convert.py).
_REASON_PREFIX = re.compile(r"^(?:Encountered graph break when attempting to trace |Failed to handle graph break "
                            r"gracefully\. |Encountered graph break that we cannot resume from\. )[^\n]*:\n\n")
# torch <= 2.6 wrote "Reason: " where later ones write "Graph Break Reason: ", and put the
# exception's class before an Unsupported break's message.
_OLD_REASON, _OLD_UNSUPPORTED = "Reason: ", "Unsupported: "
_TRACEBACK_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
_GB_ID = re.compile(r"/gb(\d+)\.html")


@dataclass(frozen=True)
class BreakArtifact:
    """A graph break as torch's ``dynamo_graph_break_reason`` artifact tells it."""

    file: str | None
    line: int | None
    reason: str  # the text after "Graph Break Reason:"
    message: str  # the exception's own message (reason without torch's "Encountered..." preamble)
    gb_type: str | None  # the headline, when torch formatted the message with fields (>= 2.7)
    gb_id: str | None
    stack: tuple[tuple[str, int, str, str | None], ...]  # (file, line, function, code), outermost first


def parse_break_artifact(text: str) -> BreakArtifact:
    head = _ARTIFACT_HEAD.match(text)
    body = text[head.end():] if head else text
    body, _, traceback = body.partition("\nUser code traceback:\n")
    if body.startswith(_OLD_REASON):
        # torch <= 2.6: "Reason: Unsupported: <message>"; its counters key the break by <message>.
        reason = body.removeprefix(_OLD_REASON).strip("\n")
        message = reason.removeprefix(_OLD_UNSUPPORTED)
    else:
        reason = body.removeprefix("Graph Break Reason: ").strip("\n")
        message = _REASON_PREFIX.sub("", reason, count=1)
    parsed = parse_break_message(message)
    stack: list[tuple[str, int, str, str | None]] = []
    # Under verbose logging torch appends the internal traceback after a blank line.
    lines = traceback.split("\n\n", 1)[0].split("\n")
    for i, line in enumerate(lines):
        frame = _TRACEBACK_FRAME.match(line)
        if frame:
            following = lines[i + 1] if i + 1 < len(lines) else ""
            code = following.strip() if following.startswith("    ") and not following.strip().startswith("^") else None
            stack.append((frame["file"], int(frame["line"]), frame["function"], code or None))
    return BreakArtifact(
        file=head["file"] if head else (stack[-1][0] if stack else None),
        line=int(head["line"]) if head else (stack[-1][1] if stack else None),
        reason=reason,
        message=message,
        gb_type=parsed.headline if parsed.explanation is not None and parsed.hints is not None and
        _FIELD.search(message) else None,
        gb_id=gb_id_from_link(parsed.doc_link),
        stack=tuple(stack),
    )
