"""The real cause of a break, where torch's label hides it.

torch files a break under the operation where tracing stopped, which is not always the one
that caused it: a NumPy integer from ``np.lcm`` on Python ints reaches a branch and is filed as
"Data-dependent branching"; ``torch.div`` on Python ints is filed as "Data dependent operator";
an "Observed exception" names neither the exception nor where it was raised in its headline.
``cause_of`` reads the break text and the code at the line and says it in words; None when it
has nothing to add to torch's label.
"""

from __future__ import annotations

import re

_NUMPY_VALUE = re.compile(r"NumpyNdarrayVariable|numpy\.(?:int|float)\d*|np\.(?:int|float)\d*", re.IGNORECASE)
_NUMPY_INT_MATH = re.compile(r"\b(?:np|numpy)\.(lcm|gcd)\s*\(")
_TORCH_DIV = re.compile(r"\btorch\.div\s*\(")
_RAISED = re.compile(r"raised exception\s+(?P<exception>[A-Za-z_][\w.]*)\((?P<args>.*?)\)\s*$", re.MULTILINE)
_USER_FRAME = re.compile(r'File "(?P<file>[^"\n]+)", line (?P<line>\d+), in (?P<function>[\w<>.]+)\n(?P<code>[^\n]*)')
_LONGEST = 160


def cause_of(gb_type: str, reason: str, code_line: str) -> str | None:
    """The cause behind torch's label for a break (``gb_type``, ``reason``) at a line whose code is
    ``code_line``; None when the label already says it."""
    text = f"{gb_type}\n{reason}"
    lowered = text.lower()
    if "observed exception" in lowered:
        return _observed_exception(text)
    if "branching" in lowered or "jump" in lowered:
        math = _NUMPY_INT_MATH.search(code_line)
        if math is not None:
            return (f"np.{math.group(1)} returns a NumPy integer, which Dynamo traces as an array: the branch on it is "
                    "filed as data-dependent (math." + math.group(1) + " gives a Python int)")
        if _NUMPY_VALUE.search(text):
            return ("the branch is on a NumPy value (a NumPy integer such as np.lcm's result, or an array), which Dynamo "
                    "traces as an array: it is filed as data-dependent")
    if "data dependent operator" in lowered and _TORCH_DIV.search(code_line):
        return ("torch.div on Python ints (sizes) makes a tensor out of a size: what follows depends on its value "
                "(a // b keeps a Python int)")
    return None


def _observed_exception(text: str) -> str | None:
    raised = _RAISED.search(text)
    if raised is None:
        return None
    exception = f"{raised.group('exception')}({_clip(raised.group('args'), 60)})"
    frames = list(_USER_FRAME.finditer(text))
    if not frames:
        return f"{exception} is raised inside the compiled code and nothing there catches it"
    origin = frames[-1]
    where = f"{origin.group('file').rsplit('/', 1)[-1]}:{origin.group('line')}"
    return _clip(f"{exception} is raised in {origin.group('function')}() at {where} (`{origin.group('code').strip()}`) "
                 "and nothing in the compiled code catches it", _LONGEST)


def _clip(text: str, longest: int) -> str:
    return text if len(text) <= longest else text[:longest - 1] + "…"
