"""Decode JSON read from a capture, bounded: text that is not JSON, or JSON nested deeper
than any capture needs, is one CaptureError, never a traceback.

Python's decoder recurses once per level, and so does every view that walks the value; a
100,000-deep ``[[[...]]]`` row would exhaust the stack. Real captures nest at most ~7 deep.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TypeAlias

from dynscope.errors import CaptureError
from dynscope.events import JsonValue as JsonValue  # re-exported: one JSON type for contract, store and model

# What JSON decodes to. Read from a capture it is untrusted: narrow it (isinstance) before use.
JsonObject: TypeAlias = dict[str, JsonValue]

MAX_DEPTH = 64


def loads(text: object, what: str | Callable[[], str]) -> JsonValue:
    """``text`` decoded; ``what`` names it in an error ("event 12's metadata"), or makes
    that name when called (callers decoding many rows build it only for a bad one)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise CaptureError(f"{_name(what)} is {_sql_type(text)} where JSON text belongs: "
                           "the capture was tampered with")
    try:
        value = json.loads(text)
    except RecursionError:  # the decoder's own bound, near 1,000 levels
        raise _too_deep(what) from None
    except ValueError as e:
        raise CaptureError(f"{_name(what)} is not JSON ({e}): the capture was damaged or tampered with") from None
    # Fewer brackets than the bound cannot nest past it: most rows skip the walk.
    if text.count("[") + text.count("{") > MAX_DEPTH and depth(value) > MAX_DEPTH:
        raise _too_deep(what)
    decoded: JsonValue = value  # json.loads answers Any; what it builds is only JSON's types
    return decoded


def depth(value: object) -> int:
    """How deep lists and dicts nest in ``value`` (iterative: a deep value cannot overflow the stack)."""
    deepest, stack = 0, [(value, 1)]
    children: Iterable[object] | None
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            break
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _too_deep(what: str | Callable[[], str]) -> CaptureError:
    return CaptureError(f"{_name(what)} nests deeper than {MAX_DEPTH} levels: the capture was tampered with")


def _name(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()


def _sql_type(value: object) -> str:
    return {int: "an integer", float: "a number", type(None): "NULL"}.get(type(value), type(value).__name__)
