"""A trial's stdout against the baseline's, line by line, leaving out only the lines that differed
between two plain runs of the program (a timing, a date, a random draw it prints).

All or nothing would let a remedy that silences a line the program printed alike in both plain runs
pass as "outputs equal" as soon as any other line moved; here it never does.
"""

from __future__ import annotations

from difflib import SequenceMatcher


def unstable_lines(first: str, second: str) -> frozenset[int]:
    """The lines (0-based, of ``first``) that the second plain run did not print alike; and where the
    second printed lines the first did not, the place before line ``p`` as ``gap(p)``."""
    a, b = first.splitlines(), second.splitlines()
    moved: set[int] = set()
    for op, i1, i2, _, _ in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            moved.update(range(i1, i2) if i2 > i1 else [gap(i1)])
    return frozenset(moved)


def gap(position: int) -> int:
    """The place before line ``position`` (the end: ``len(lines)``), told apart from the lines."""
    return -(position + 1)


def same_stdout(baseline: str, trial: str, unstable: frozenset[int]) -> bool:
    """Every line the baseline printed alike in both plain runs is printed by the trial, in order,
    and whatever else the trial prints takes the place of lines that moved between the plain runs."""
    if baseline == trial:
        return True
    a, b = baseline.splitlines(), trial.splitlines()
    for op, i1, i2, _, _ in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if i1 == i2:  # lines the trial added: only where the plain runs differed
            if not ({i1 - 1, i1, gap(i1)} & unstable):
                return False
        elif not set(range(i1, i2)) <= unstable:  # a stable line changed or went missing
            return False
    return True
