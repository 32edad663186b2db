"""Checking a Chrome trace event file the way Perfetto's JSON importer reads it."""

from __future__ import annotations

import json


def validate_trace(document: dict) -> list[dict]:
    """What Perfetto's JSON importer needs: every event well-typed, B/E nested per track."""
    events = document["traceEvents"]
    assert isinstance(events, list) and events
    stacks: dict[tuple[int, int], list[str]] = {}
    for e in events:
        assert isinstance(e["name"], str) and e["ph"] in {"B", "E", "X", "i", "M"}
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in {"process_name", "process_sort_index", "thread_name"} and "args" in e
            continue
        assert isinstance(e["ts"], float) and e["ts"] > 0
        stack = stacks.setdefault((e["pid"], e["tid"]), [])
        if e["ph"] == "B":
            stack.append(e["name"])
        elif e["ph"] == "E":
            assert stack and stack.pop() == e["name"], f"unbalanced E {e}"
        elif e["ph"] == "X":
            assert e["dur"] >= 0
    assert all(not s for s in stacks.values()), "regions left open"
    json.dumps(document)  # plain JSON
    return events
