"""Read the parts of torch's graph-break message back out of its text.

Torch (>= 2.7) formats every graph break with ``format_graph_break_message``::

    <gb_type>
      Explanation: <explanation, continuation lines indented 4>
      Hint: <hint>
      Hint: <hint>

      Developer debug context: <context>

     For more details about this graph break, please visit: <link>

Older torch wrote free text; then the whole message is the explanation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


def parse_break_message(message: str) -> BreakText:
    text = message.rsplit(_CHAINED, 1)[-1].strip("\n")
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
_REASON_PREFIX = re.compile(r"^Encountered graph break when attempting to trace [^\n]*:\n\n")
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
    reason = body.removeprefix("Graph Break Reason: ").strip("\n")
    message = _REASON_PREFIX.sub("", reason, count=1)
    parsed = parse_break_message(message)
    gb_id = _GB_ID.search(parsed.doc_link or "")
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
        gb_id=f"GB{int(gb_id.group(1)):04d}" if gb_id else None,
        stack=tuple(stack),
    )
