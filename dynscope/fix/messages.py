"""What fix says, told apart by type: a ``Phase`` is a step of its walk (the baseline, a run that
ended in its time, the combined run), which a progress line in a log rate-limits; any other text
fix says (a warning, a run started early, a run stopped and why, a finding) is a note, said at once."""

from __future__ import annotations


class Phase(str):
    """A step of fix's walk, as the text it is said with."""
