"""Where the test suite's CPU time goes: each test's own CPU and that of every process it waited for.

The suite is CPU-bound on 2 cores (issue 21: CI spends about 1.7-1.9 of them), so CPU seconds, not
wall time, say what a change to the tests would save; they also move far less with the machine's load.

As a pytest plugin (the module on PYTHONPATH), one JSON line per test to SUITE_CPU_OUT:

    SUITE_CPU_OUT=/tmp/cpu.jsonl PYTHONPATH=bench python -m pytest -q -n 2 --dist loadfile -p suite_cpu tests/integration

then the table, per file (or per test with --tests):

    python bench/suite_cpu.py /tmp/cpu.jsonl [--tests] [--most 40]

A test's CPU is its worker's own (RUSAGE_SELF) plus its children's (RUSAGE_CHILDREN), measured around
the test's setup, call and teardown; a module-scoped fixture counts in the first test that needs it.
A process nobody waits for (a daemon, a fork server's grandchild its server did not reap) is not counted.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class CpuOfTest:
    """One line of SUITE_CPU_OUT: a test's own CPU seconds, its waited children's, and its wall time."""

    id: str
    self: float
    children: float
    wall: float
    start: float = 0.0  # time.time() when the test began: the timeline of the run
    worker: str = ""  # xdist's worker id ("gw0"), or "" without xdist


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    own0, children0 = _cpu()
    started = time.time()
    yield
    own1, children1 = _cpu()
    out = os.environ.get("SUITE_CPU_OUT")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps({"id": item.nodeid, "self": own1 - own0, "children": children1 - children0,
                                "wall": time.time() - started, "start": started,
                                "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path")
    parser.add_argument("--tests", action="store_true", help="one row per test, not per file")
    parser.add_argument("--most", type=int, default=40)
    args = parser.parse_args()
    with open(args.path) as f:
        rows = [CpuOfTest(**json.loads(line)) for line in f]
    cpu: collections.defaultdict[str, float] = collections.defaultdict(float)
    children: collections.defaultdict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    for row in rows:
        key = row.id if args.tests else row.id.split("::")[0]
        cpu[key] += row.self + row.children
        children[key] += row.children
        count[key] += 1
    print(f"{'CPU s':>8} {'children':>8} {'tests':>5}  {'test' if args.tests else 'file'}")
    for key, seconds in sorted(cpu.items(), key=lambda item: -item[1])[: args.most]:
        print(f"{seconds:8.1f} {children[key]:8.1f} {count[key]:5d}  {key}")
    print(f"{sum(cpu.values()):8.1f} {sum(children.values()):8.1f} {len(rows):5d}  in all")


if __name__ == "__main__":
    main()
