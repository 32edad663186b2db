"""torch's recompile texts: a guard failure ("0/0: n == 2  # ...") and the recompile limit's message.

Beside dynscope.model.guards (the guard tree): both read what torch prints about guards.
"""

from __future__ import annotations

import re

from dynscope import events as contract
from dynscope.model.break_text import first_line
from dynscope.model.records import GuardFailure

_EXPECTED_ACTUAL = re.compile(r"expected (?P<expected>.+?), actual (?P<actual>.+?)\.?$")
_EXPECTED_FLAG = re.compile(r"mismatch\. expected (?P<name>\w+)=(?P<value>[01])\.?$")
_COMPARISON = re.compile(r"(?P<lhs>.+?)\s*==\s*(?P<rhs>.+)|(?P<lhs2>.+?)\s+is\s+(?P<rhs2>.+)")
_COMPILE_ID = re.compile(r"!?[\d/]+(_\d+)?")
_LIMIT_TEXT = re.compile(r"recompile limit exceeded|cache_size_limit|recompile_limit", re.IGNORECASE)
_LIMIT_VALUE = re.compile(r"exceeding the (?P<name>\w+) cache size limit \(currently set to (?P<value>\d+)\)")
_LIMIT_NAME = re.compile(r"(accumulated_recompile_limit|recompile_limit|cache_size_limit)")


def guard_failure(text: str, probed: contract.GuardFailureSeen | None) -> GuardFailure:
    """Parse '0/0: n == 2   # return x * n  # f.py:4 in f\\nUser stack trace: ...'; ``probed`` is
    what dynscope's probe saw of the same failure (the guard's own text, the actual value)."""
    first = text.split("\n", 1)[0]
    failed_id, sep, rest = first.partition(": ")
    if not sep or not _COMPILE_ID.fullmatch(failed_id):
        failed_id, rest = "", first
    parts = rest.split("  #")
    guard = parts[0].strip()
    user_code = parts[1].strip() if len(parts) > 2 and parts[1].strip() else None
    expected: str | None
    actual: str | None
    match = _EXPECTED_ACTUAL.search(guard)
    flag = _EXPECTED_FLAG.search(guard)
    if match:
        expected, actual = match.group("expected"), match.group("actual")
    elif flag:  # "tensor 'x' requires_grad mismatch. expected requires_grad=1": a flag has two values
        expected = f"{flag['name']}={flag['value']}"
        actual = f"{flag['name']}={1 - int(flag['value'])}"
    else:
        expected = expected_from_guard(guard)
        actual = probed.actual if probed else None
    return GuardFailure(failed_id, guard, probed.guard if probed else guard, expected, actual, user_code)


def expected_from_guard(guard: str) -> str | None:
    """'n == 2' -> '2'; "mode == 'a'" -> "'a'"; 'x is None' -> 'None'; 'not ___dict_contains(...)' -> None.
    Torch's prose ("... mismatch. expected ...") is not a comparison: None."""
    match = _COMPARISON.fullmatch(guard)
    if not match or "mismatch" in guard:
        return None
    rhs: str | None = match.group("rhs") or match.group("rhs2")
    return rhs


def is_recompile_limit(reason: str | None) -> bool:
    """Whether a failed compile's reason is Dynamo's recompile (cache size) limit."""
    if not reason:
        return False
    return bool(_LIMIT_TEXT.search(first_line(reason)) or _LIMIT_VALUE.search(reason))


def recompile_limit(reason: str) -> tuple[str, int | None]:
    """(config name, value) from torch's "exceeding the recompile_limit cache size limit (currently set to 8)"."""
    match = _LIMIT_VALUE.search(reason)
    if match:
        return match["name"], int(match["value"])
    named = _LIMIT_NAME.search(reason)
    return (named.group(1) if named else "recompile_limit"), None
