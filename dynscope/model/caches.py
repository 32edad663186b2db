"""The compile caches of a run, as torch logged them: one record per cache lookup.

Torch logs every lookup of the AOTAutograd cache and of Inductor's FX graph cache as an
artifact (``aotautograd_cache_hit`` / ``_miss`` / ``_bypass``, ``fx_graph_cache_*``; Dynamo's
own caches log their bypasses) whose JSON payload holds the state, the key, the bypass reason
and the key's *components*: one ``[hash] name: value`` line per part of the key (the graph, each
input's metadata, each config value, the torch version ...). Two lookups' components, compared
by hash, say which part of the key changed. The program's ``save_cache_artifacts`` /
``load_cache_artifacts`` calls are dynscope's own records (torch logs neither).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, cast

from dynscope import events as contract
from dynscope.model.reading import RecordReader

CacheLayer = Literal["dynamo", "aotautograd", "fx_graph"]
CacheState = Literal["hit", "miss", "bypass"]
LAYERS: tuple[CacheLayer, ...] = ("dynamo", "aotautograd", "fx_graph")
STATES: tuple[CacheState, ...] = ("hit", "miss", "bypass")

# "[7ra2zojv...] inductor_config[comment_origin]: False"; a value may span lines (the graph's code)
_COMPONENT = re.compile(r"\[(?P<digest>[^\]\s]+)\] (?P<name>[^:\n]+?): ?(?P<value>.*)", re.DOTALL)


@dataclass(frozen=True)
class KeyComponent:
    """One part of a cache key: its name (``inductor_config[comment_origin]``), torch's hash of
    its value, and the value as torch printed it."""

    name: str
    digest: str
    value: str


@dataclass(frozen=True)
class CacheLookup:
    """One lookup of one cache layer during a compile."""

    event_id: int
    compile_id: str | None
    layer: CacheLayer
    state: CacheState
    key: str | None
    bypass_reason: str | None
    components: tuple[KeyComponent, ...]  # empty where torch logged no key details
    saved_s: float | None  # a hit: the compile time torch says it saved


@dataclass(frozen=True)
class KeyChange:
    """One key component that differs between two lookups (None: absent on that side)."""

    component: str
    before: str | None
    after: str | None


def parse_components(lines: tuple[str, ...]) -> tuple[KeyComponent, ...]:
    found = []
    for line in lines:
        match = _COMPONENT.fullmatch(line)
        if match is not None:
            found.append(KeyComponent(match["name"].strip(), match["digest"], match["value"]))
    return tuple(found)


def key_changes(before: tuple[KeyComponent, ...], after: tuple[KeyComponent, ...]) -> list[KeyChange]:
    """The components whose hash differs between two keys, in the later key's order, then those
    only the earlier key had."""
    old = {c.name: c for c in before}
    new = {c.name: c for c in after}
    changes = [KeyChange(c.name, old[c.name].value if c.name in old else None, c.value)
               for c in after if c.name not in old or old[c.name].digest != c.digest]
    changes += [KeyChange(c.name, c.value, None) for c in before if c.name not in new]
    return changes


def shared_components(a: tuple[KeyComponent, ...], b: tuple[KeyComponent, ...]) -> int:
    """How many components two keys have in common (name and hash): how near two entries are."""
    return len({(c.name, c.digest) for c in a} & {(c.name, c.digest) for c in b})


_ARTIFACT_LAYER = {f"{contract.ARTIFACT_PREFIX}{name}": (cast(CacheLayer, layer), cast(CacheState, state))
                   for name, layer, state in contract.CACHE_ARTIFACTS}


def read_cache_lookups(records: RecordReader) -> list[CacheLookup]:
    """Every cache lookup torch logged, in the order it logged them."""
    reader = records.reader
    found = []
    for event in reader.events(list(_ARTIFACT_LAYER)):
        layer, state = _ARTIFACT_LAYER[event.name]
        try:
            logged = contract.CacheLookup.parse_payload(event.name, reader.payload(event.payload_hash))
        except contract.NotUnderstood as e:
            records.not_parsed(e, event.id)
            continue
        saved = (logged.time_saved_ns / 1e9 if logged.time_saved_ns is not None
                 else logged.time_saved_ms / 1e3 if logged.time_saved_ms is not None else None)
        found.append(CacheLookup(event.id, event.compile_id, layer, state, logged.key, logged.cache_bypass_reason,
                                 parse_components(logged.components), saved))
    return found


def read_portable_calls(records: RecordReader) -> list[contract.CacheArtifactsCall]:
    """The program's save_cache_artifacts / load_cache_artifacts calls, in order."""
    return [call for call, _ in records.records(contract.CacheArtifactsCall)]


def read_warm_start(records: RecordReader) -> contract.WarmStart | None:
    """``explain --warm``: the cold run this warm run followed (None: not a warm run)."""
    found = records.records(contract.WarmStart)
    return found[-1][0] if found else None
