"""Checked narrowing of JSON read from a capture (untrusted: any value may have any JSON type).

Each helper answers the value when it has the asked type, else the caller's default: a view
never trusts a key to be there or to hold what torch usually puts there.
"""

from __future__ import annotations

from dynscope.store.json_text import JsonObject, JsonValue

__all__ = ["JsonObject", "JsonValue", "as_list", "as_number", "as_object", "as_str"]


def as_object(value: JsonValue) -> JsonObject:
    """The value when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: JsonValue) -> list[JsonValue]:
    """The value when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def as_str(value: JsonValue) -> str | None:
    return value if isinstance(value, str) else None


def as_number(value: JsonValue) -> float | None:
    """An int or float (not a bool, which JSON keeps apart) as a float; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
