"""Read Dynamo's guard tree (the ``dynamo_cpp_guards_str`` event) into a flat guard list.

The tree looks like::

    +- RootGuardManager
    | +- GLOBAL_STATE: ___check_global_state() against {...}
    | +- GuardManager: source=L['x'], accessed_by=..., type=<class 'torch.Tensor'>
    | | +- TENSOR_MATCH: check_tensor(L['x'], ...)  # y = self.l(x)  # model.py:12 in forward

Managers carry the guarded source; leaves are the checks, optionally followed by
``  # <user code>  # <file:line in function>``.
"""

from __future__ import annotations

import re

from dynscope.model.records import Guard

_ENTRY = re.compile(r"^(?P<indent>[| ]*)\+- (?P<kind>[A-Za-z_]+): ?(?P<rest>.*)$")
_SOURCE = re.compile(r"source=(?P<source>.+?), accessed_by=")


def parse_guard_tree(compile_id: str, text: str) -> list[Guard]:
    guards: list[Guard] = []
    sources: dict[int, str | None] = {}  # depth -> source of the manager at that depth
    for line in text.splitlines():
        match = _ENTRY.match(line)
        if match is None:
            continue
        depth = len(match.group("indent")) // 2
        kind, rest = match.group("kind"), match.group("rest")
        if kind.endswith("GuardManager"):
            source = _SOURCE.search(rest)
            sources[depth] = source.group("source") if source else None
            for deeper in [d for d in sources if d > depth]:
                del sources[deeper]
            continue
        parts = rest.split("  # ")
        check = parts[0].strip()
        user_code = parts[1].strip() if len(parts) > 2 and parts[1].strip() else None
        location = parts[-1].strip() if len(parts) > 1 else None
        if location is not None:
            location = re.sub(r"\s*\(HINT:.*\)$", "", location) or None
        enclosing = [sources[d] for d in sorted(sources) if d < depth]
        guards.append(Guard(compile_id, kind, enclosing[-1] if enclosing else None, check, user_code, location))
    return guards
