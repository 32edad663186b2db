"""Check a capture's schema before any query: the file must hold our tables, nothing else.

SQLite keeps a database's schema as SQL text in ``sqlite_master``, and a view, a trigger or
a virtual table there is a program that runs when its name is queried: a capture whose
``events`` is a VIEW over a recursive CTE makes every ``SELECT ... FROM events`` run forever.
So the schema is compared, entry by entry, with the one our writer creates (``schema.DDL``):
the same tables and indexes, the same definitions, no other entry of any kind.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Iterator
from typing import Any

from dynscope.errors import CaptureError
from dynscope.store.schema import DDL

_COMMENT = re.compile(r"--[^\n]*")


@functools.cache
def expected_schema() -> frozenset[tuple[str, str, str, str | None]]:
    """(type, name, table, normalized SQL) of every entry the writer's DDL creates."""
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(DDL)
        return frozenset(_entries(db))
    finally:
        db.close()


def check_schema(db: sqlite3.Connection, path: str) -> None:
    """Raise CaptureError unless the schema is exactly the capture schema."""
    found = set(_entries(db))
    expected = expected_schema()
    if found == expected:
        return
    expected_names = {name for _, name, _, _ in expected}
    # Name the first thing that is wrong: a program (view, trigger, virtual table) first.
    for kind, name, _table, sql in sorted(found - expected, key=_program_first):
        if kind in ("view", "trigger"):
            raise CaptureError(f"{path} is not a dynscope capture: it holds a {kind} {name!r} (SQL that would run "
                               "when it is read); refused without running it")
        if _kind(kind, sql) == "virtual table":
            raise CaptureError(f"{path} is not a dynscope capture: it holds a virtual table {name!r}; "
                               "refused without reading it")
        if name in expected_names:
            raise CaptureError(f"{path} is not a dynscope capture: its {kind} {name!r} is not defined as a "
                               "capture's is; refused without reading it")
        raise CaptureError(f"{path} is not a dynscope capture: it holds an unexpected {kind} {name!r}; "
                           "refused without reading it")
    missing = sorted(name for _, name, _, _ in expected - found)
    raise CaptureError(f"{path} is not a dynscope capture: it lacks {', '.join(missing)}")


def _entries(db: sqlite3.Connection) -> Iterator[tuple[Any, Any, Any, str | None]]:
    # (type, name, tbl_name: text in any SQLite file, compared as they are; sql normalised)
    for kind, name, table, sql in db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"):
        yield kind, name, table, _normalize(sql)


def _normalize(sql: object) -> str | None:
    """The SQL without comments and with single spaces: only the writer's comments differ
    between versions. (A quote inside a comment is dropped with it, so no string literal can
    hide SQL from this comparison: the result must equal ours, which has no quotes.)"""
    if sql is None:
        return None
    if not isinstance(sql, str):
        return repr(sql)
    return " ".join(_COMMENT.sub(" ", sql).split())


def _kind(kind: str, sql: str | None) -> str:
    if kind == "table" and sql and sql.upper().startswith("CREATE VIRTUAL"):
        return "virtual table"
    return kind


def _program_first(entry: tuple[str, str, str, str | None]) -> tuple[int, str]:
    kind, name, _, sql = entry
    return (0 if kind in ("view", "trigger") or _kind(kind, sql) == "virtual table" else 1, str(name))
