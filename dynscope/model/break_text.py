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
