"""Runs started before anyone knows they are wanted, so that free job slots do not idle.

``dynscope fix`` makes three such runs: the trials started while the baseline still runs (their
problems read from its partial capture: ``early-N``), the combined guess (every first trial's
remedy in one run, started with the trials, on the guess that every one wins), and the stacked
retry (the winners plus the trade-off rewrites, started beside the winners' run on the guess that
they verify). All three follow one rule, so the document is the one the strict sequence
(``--jobs 1``: baseline, trials, combined run) writes, whatever ran early:

- a later step that needs a run **claims** one started with the same actions for the same purpose
  (``claim``), and uses it as if it had started it itself (renamed to its final name);
- whatever is still unclaimed when its question is settled is **discarded** (``settle``): stopped
  if it runs, its files removed; it counts among the runs only where the strict sequence makes that
  run too (the combined guess: ``in_sequence``), else it leaves no trace.

A speculation known to be useless before it ends (the guess, once one of its remedies lost) is
**given up** at once (``give_up``), freeing its slot; the same counting rule holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dynscope.events import Action
from dynscope.fix.trials import RunPool, TrialRun, rename


@dataclass
class Speculation:
    purpose: str  # what it was started for: a remedy's key (an early trial), or "combined" (a combined run)
    actions: tuple[Action, ...]
    run: TrialRun
    in_sequence: bool  # the strict sequence (--jobs 1) makes this run too: it counts even unclaimed
    claimed: bool = False
    given_up: bool = False

    @property
    def counted_unclaimed(self) -> bool:
        """An unclaimed speculation the document still counts among the runs: one the strict
        sequence makes too, that ran (or was given up: --jobs 1 would have run it in full)."""
        return self.in_sequence and not self.claimed and (self.run.skipped is None or self.given_up)


@dataclass
class Speculations:
    """Every speculative run of one fix, and the one rule they are used or dropped by."""

    pool: RunPool
    items: list[Speculation] = field(default_factory=list)
    early_names: int = 0  # early-N names handed out (one never reused in a fix run)
    settled: list[Speculation] = field(default_factory=list)  # dropped, kept for the count

    def next_early_name(self) -> str:
        self.early_names += 1
        return f"early-{self.early_names}"

    def add(self, purpose: str, run: TrialRun, *, in_sequence: bool = False) -> Speculation:
        item = Speculation(purpose, tuple(run.actions), run, in_sequence)
        self.items.append(item)
        return item

    def started_for(self) -> set[str]:
        return {s.purpose for s in self.items}

    def claim(self, purpose: str, actions: list[Action], name: str | None = None) -> TrialRun | None:
        """The run started for this purpose with these very actions, not given up (nor left unstarted
        by the budget); None: the step starts its own. ``name``: its final name, given now if it has
        ended, else when it ends."""
        found = next((s for s in self.items if not s.claimed and s.purpose == purpose
                      and s.actions == tuple(actions) and s.run.skipped is None), None)
        if found is None:
            return None
        found.claimed = True
        if name is not None and found.run.name != name:
            if self.pool.is_running(found.run):
                found.run.rename_to = name
            else:
                rename(found.run, name)
        return found.run

    def release(self, run: TrialRun) -> None:
        """A claimed run the step turned out not to need (the retry it was taken for was not made):
        unclaimed again, to be settled like the others."""
        for item in self.items:
            if item.run is run:
                item.claimed = False

    def give_up(self, item: Speculation, why: str) -> None:
        """Stop a speculation known to be useless before it ends (its slot goes to the next run)."""
        running = self.pool.is_running(item.run)
        item.run.skipped = f"{'stopped' if running else 'not started'}: {why}"
        item.given_up = True
        if running:
            self.pool.drop(item.run)

    def settle(self) -> None:
        """Every unclaimed speculation is discarded: stopped if it runs, its files removed."""
        for item in [s for s in self.items if not s.claimed]:
            if not item.given_up:  # (given up: dropped already)
                self.pool.drop(item.run)
            self.items.remove(item)
            self.settled.append(item)

    def counted(self) -> int:
        """The runs the document counts that no step claimed (claimed ones count as the claimer's)."""
        return sum(1 for s in self.items + self.settled if s.counted_unclaimed)
