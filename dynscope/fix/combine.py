"""The combined change of several remedies: one run's actions, and the patch the user pastes.

Pure: source rewrites of one file are merged into one text (``merge``); nothing runs here.
"""

from __future__ import annotations

from dataclasses import dataclass

from dynscope.analysis.remedies import Remedy
from dynscope.analysis.source_edits import SourceEdit, merge
from dynscope.events import Action, ChangeSource


@dataclass(frozen=True)
class CombinedChange:
    """The actions of a combined run: every remedy's, the source rewrites merged into one text per file."""

    remedies: list[Remedy]  # those kept (a rewrite conflicting with an earlier one is left out)
    actions: list[Action]
    edits: tuple[SourceEdit, ...]  # the merged files
    conflicts: tuple[str, ...]  # one line per rewrite left out
    settings: tuple[str, ...] = ()  # the config lines the kept rewrites need


def combine(remedies: list[Remedy]) -> CombinedChange:
    """Rewrites of one file are applied one after another on its text (``merge``); one whose
    lines an earlier one changed is left out, and said so. Other remedies keep their action."""
    rewrites = [r for r in remedies if r.edits]
    merged = merge([e for r in rewrites for e in r.edits], [r.title for r in rewrites for _ in r.edits])
    owner = [r for r in rewrites for _ in r.edits]
    dropped = {owner[i].key for i in range(len(owner)) if i not in merged.kept}
    kept = [r for r in remedies if r.key not in dropped]
    actions: list[Action] = [r.action for r in kept if not r.edits]
    # the settings the kept rewrites need, once each (a setting remedy may be there already)
    actions += [a for a in dict.fromkeys(a for r in kept if r.edits for a in r.also) if a not in actions]
    if merged.edits:
        actions.append(ChangeSource(tuple((e.file.path, e.new) for e in merged.edits)))
    settings = tuple(dict.fromkeys(f"{a.module}.{a.name} = {a.value!r}" for r in kept if r.edits for a in r.also))
    return CombinedChange(kept, actions, merged.edits, merged.conflicts, settings)


def combined_patch(remedies: list[Remedy], edits: tuple[SourceEdit, ...] = ()) -> str:
    """Config lines once each (imports first), then the code changes (source rewrites as one
    diff per file, ``edits``: merged)."""
    imports: list[str] = []
    lines: list[str] = []
    others: list[str] = []
    for r in remedies:
        if r.edits:
            if r.also:
                imports.append("import torch")
                lines.extend(f"{a.module}.{a.name} = {a.value!r}" for a in r.also)
            continue
        if r.applies_as == "config":
            for line in r.patch.splitlines():
                (imports if line.startswith("import ") else lines).append(line)
        else:
            others.append(r.patch.rstrip("\n"))
    others.extend(e.diff().rstrip("\n") for e in edits)
    head = list(dict.fromkeys(imports)) + list(dict.fromkeys(lines))
    return "\n".join(head + ([""] if head and others else []) + others) + "\n"
