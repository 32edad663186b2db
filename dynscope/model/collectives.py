"""The collectives a graph issues, read from the FX graph Dynamo printed (``dynamo_output_graph``).

The printed graph is in both an explained capture and a TORCH_TRACE log, so both yield the
same collectives. Dynamo turns ``dist.all_reduce(t)`` into functional collectives::

    tensor: "f32[1][1]cpu" = torch.ops._c10d_functional.all_reduce(total, 'sum', '0')

whose last string argument is the process group's name. ``wait_tensor`` is not a collective.
Torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NODE = re.compile(
    r'^\s*(?P<name>\w+): "(?P<meta>[^"]*)" = torch\.ops\.(?P<ns>_?c10d_functional\w*)\.(?P<op>\w+)'
    r'(?:\.\w+)?\((?P<args>.*)\)(?:;.*)?$',
    re.MULTILINE,
)
_TENSOR_META = re.compile(r"^(?P<dtype>[a-z]+\d*)(?P<shape>\[[^\]]*\])")
_STRING_ARG = re.compile(r"'([^']*)'")
_NOT_COLLECTIVES = frozenset({"wait_tensor"})


@dataclass(frozen=True)
class Collective:
    compile_id: str | None
    order: int  # position among this graph's collectives
    op: str  # "all_reduce", "all_gather_into_tensor", ...
    group: str | None  # the process group's name, as the graph passes it
    shape: str | None  # "f32[1]"
    node: str  # the FX node's name


def parse_collectives(printed_graph: str, compile_id: str | None = None) -> list[Collective]:
    found: list[Collective] = []
    for match in _NODE.finditer(printed_graph):
        op = match["op"]
        if op in _NOT_COLLECTIVES:
            continue
        meta = _TENSOR_META.match(match["meta"])
        strings = _STRING_ARG.findall(match["args"])
        found.append(Collective(
            compile_id=compile_id,
            order=len(found),
            op=op,
            group=strings[-1] if strings else None,
            shape=f"{meta['dtype']}{meta['shape']}" if meta else (match["meta"] or None),
            node=match["name"],
        ))
    return found
