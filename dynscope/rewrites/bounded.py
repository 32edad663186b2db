"""The rewrite step on a stranger's file, bounded in size, nesting, time and memory.

libcst holds a whole file as a tree of Python objects: about 600 MB and seconds of parsing for
1 MiB of dense code, and a file nested a few hundred levels deep (a long ``elif`` chain, a long
``a + b + ...``) overflows its recursion. So the catalogue (dynscope/rewrites/catalogue.py) never
runs on a file in fix's own process: a worker (dynscope/rewrites/worker.py, a fresh ``python -I``)
gets the file and the break on stdin and answers in JSON on stdout, and here

- a file over ``MAX_SOURCE_BYTES`` is not sent at all;
- the worker declines a file whose syntax tree is deeper than ``MAX_NESTING`` (measured with
  ``ast``, which does not recurse in Python, before libcst sees it);
- reading the tree's structure every rule shares gets ``STRUCTURE_SECONDS``, and each rule
  ``RULE_SECONDS`` (a timer in the worker; the rule is skipped, the others go on);
- the whole file gets ``FILE_SECONDS`` and no more than what is left of fix's ``--budget``
  (``RewriteBudget.deadline``): then the worker is killed;
- the worker's address space is capped at ``WORKER_MEMORY_BYTES`` (``RLIMIT_AS``).

A declined file or rule is said in one line (``RewriteBudget.say``) and fix goes on without it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field

from dynscope.rewrites import BreakSite, Offers, Rewrite

MAX_SOURCE_BYTES = 1 << 20  # transformers' largest file (modeling_utils.py) is 280 KB
MAX_NESTING = 200  # the deepest of torch's and transformers' 5,197 files: 94; libcst fails from about 350 (elif)
RULE_SECONDS = 10.0  # one rule on transformers' modeling_utils.py: under 0.5 s
STRUCTURE_SECONDS = 30.0  # each node's lines and holder, which every rule reads: 0.4 s on modeling_utils.py
FILE_SECONDS = 60.0  # the parse and every rule of one file
WORKER_MEMORY_BYTES = 2 << 30  # address space; 1 MiB of dense code peaks at 600-700 MB resident


@dataclass(frozen=True)
class RewriteBudget:
    """What one fix allows its rewrite step: the end of its ``--budget`` and where to say what was declined."""

    deadline: float | None = None  # time.time() at which fix's --budget ends; None: FILE_SECONDS alone
    say: Callable[[str], None] | None = None
    # each file and break asked about once: fix asks again on every partial read of the baseline
    known: dict[tuple[str, int, BreakSite, Offers], list[Rewrite]] = field(default_factory=dict, compare=False, repr=False)
    spent: list[str] = field(default_factory=list, compare=False, repr=False)  # the file at which the time ran out


def bounded_rewrites(source: str, site: BreakSite, shown: str, budget: RewriteBudget | None = None,
                     offers: Offers | None = None) -> list[Rewrite]:
    """The catalogue's candidates for the break at ``site`` in ``source`` (the file ``shown``), made
    within the bounds above; [] with one line said when the file or the step is declined."""
    budget = budget or RewriteBudget()
    offers = offers or Offers()
    key = (shown, hash(source), site, offers)
    if key not in budget.known:
        budget.known[key] = _bounded(source, site, shown, budget, offers)
    return list(budget.known[key])


def _bounded(source: str, site: BreakSite, shown: str, budget: RewriteBudget, offers: Offers) -> list[Rewrite]:
    name = shown if shown.isprintable() else repr(shown)  # a file named with a line end is still one line

    def say(why: str) -> None:
        if budget.say is not None:
            budget.say(f"rewrites of {name} (line {site.line}): {why}; fix goes on without them")

    data = source.encode("utf-8", "surrogatepass")
    if len(data) > MAX_SOURCE_BYTES:
        say(f"{len(data):,} bytes is more than the rewrite step reads ({MAX_SOURCE_BYTES >> 20} MiB)")
        return []
    other = _other_text(data, source)
    if other is not None:
        say(other)
        return []
    seconds = FILE_SECONDS
    if budget.deadline is not None:
        seconds = min(seconds, budget.deadline - time.time())
        if seconds < 1:
            if not budget.spent:  # said once: a program with a thousand breaks is not a thousand lines
                budget.spent.append(shown)
                say("no time left in --budget (nor for any file after it)")
            return []
    request = json.dumps({"source": source, "site": dataclasses.asdict(site), "rule_seconds": RULE_SECONDS,
                          "offers": {"hatches": sorted(offers.hatches), "compiled": sorted(offers.compiled),
                                     "compiled_lines": sorted(offers.compiled_lines)},
                          "structure_seconds": STRUCTURE_SECONDS,
                          "max_nesting": MAX_NESTING, "memory_bytes": WORKER_MEMORY_BYTES},
                         ensure_ascii=False).encode("utf-8", "surrogatepass")
    try:
        done = subprocess.run(_worker_command(), input=request, capture_output=True, timeout=seconds, cwd="/")
    except subprocess.TimeoutExpired:
        say(f"took more than {seconds:.0f} s{' (the rest of --budget)' if seconds < FILE_SECONDS else ''}: stopped")
        return []
    except OSError as e:
        say(f"the rewrite worker did not start: {e.strerror}")
        return []
    answer = _answer(done)
    if isinstance(answer, str):
        say(answer)
        return []
    rewrites, notes = answer
    for note in notes:
        say(note)
    return rewrites


def _other_text(data: bytes, source: str) -> str | None:
    """Why Python would run other text than the UTF-8 the rules read, if it would: a coding cookie
    (``# coding: utf-7``) that decodes the same bytes differently, or names no codec."""
    lines = iter(data.splitlines(keepends=True)[:2])
    try:
        encoding, _ = tokenize.detect_encoding(lambda: next(lines, b""))
    except SyntaxError:
        return "its coding line names no encoding Python knows"
    if encoding in ("utf-8", "utf-8-sig"):
        return None
    try:
        same = data.decode(encoding) == source
    except (UnicodeDecodeError, LookupError):
        same = False
    return None if same else f"it declares the encoding {encoding}, in which Python reads other text than the UTF-8 the rules read"


def _worker_command() -> list[str]:
    """``python -I`` (no directory, environment variable or user site on the path) with dynscope's own
    install on it: the worker imports nothing from where the program lives. The directory that holds
    this dynscope goes first only when it is not on the path already (a checkout, a user site), so
    that a site-packages never comes before the standard library."""
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return [sys.executable, "-I", "-c",
            f"import sys; p = {package_parent!r}; p in sys.path or sys.path.insert(0, p); "
            "from dynscope.rewrites.worker import main; main()"]


def _answer(done: subprocess.CompletedProcess[bytes]) -> tuple[list[Rewrite], list[str]] | str:
    """The worker's rewrites and notes, or why there are none."""
    if done.returncode < 0:
        return f"the rewrite worker ended by signal {-done.returncode} (over {WORKER_MEMORY_BYTES >> 30} GiB?)"
    try:
        document = json.loads(done.stdout.decode("utf-8", "surrogatepass"))
        if done.returncode != 0 or not isinstance(document, dict):
            raise ValueError
        if "declined" in document:
            return str(document["declined"])
        rewrites = [Rewrite(**{**r, "settings": tuple(r["settings"])}) for r in document["rewrites"]]
        return rewrites, [str(n) for n in document["notes"]]
    except (ValueError, TypeError, KeyError):
        return f"the rewrite worker failed (exit {done.returncode})"
