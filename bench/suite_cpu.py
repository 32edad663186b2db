"""Where the test suite's CPU time goes: each test's own CPU and that of every process it waited for.

The suite is CPU-bound on 2 cores (issue 21: CI spends about 1.7-1.9 of them), so CPU seconds, not
wall time, say what a change to the tests would save; they also move far less with the machine's load.

As a pytest plugin (the module on PYTHONPATH), one JSON line per test to SUITE_CPU_OUT:

    SUITE_CPU_OUT=/tmp/cpu.jsonl PYTHONPATH=bench python -m pytest -q -n 2 --dist loadfile -p suite_cpu tests/integration

then the table, per file (or per test with --tests):

    python bench/suite_cpu.py /tmp/cpu.jsonl [--tests] [--most 40]

The controller also samples /proc/stat once a second into SUITE_CPU_OUT.cores: how many of the
machine's cores were busy (every process's, not only the suite's). With --idle, the table says how
busy the cores were over the run, and which tests were running while cores stood idle (each idle
second shared among the tests running in it): where the run was not CPU-bound.

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
import threading
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


@dataclass(frozen=True)
class BusyCores:
    """One line of SUITE_CPU_OUT.cores: the cores busy during the second that ended ``at``."""

    at: float  # time.time()
    busy: float  # 0 to ``cores``
    cores: int


_CORES_SUFFIX = ".cores"
_STOP_SAMPLING = pytest.StashKey[threading.Event]()


def _busy_and_total_jiffies() -> tuple[int, int, int]:
    """The machine's busy and total CPU time so far (/proc/stat, in jiffies) and its core count."""
    with open("/proc/stat") as f:
        lines = f.read().splitlines()
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in lines[0].split()[1:9])
    cores = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    total = user + nice + system + idle + iowait + irq + softirq + steal
    return total - idle - iowait, total, cores


def _sample_busy_cores(out: str, stop: threading.Event) -> None:
    busy0, total0, cores = _busy_and_total_jiffies()
    while not stop.wait(1.0):
        busy1, total1, cores = _busy_and_total_jiffies()
        if total1 > total0:
            with open(out, "a") as f:
                f.write(json.dumps({"at": time.time(), "busy": cores * (busy1 - busy0) / (total1 - total0),
                                    "cores": cores}) + "\n")
        busy0, total0 = busy1, total1


def pytest_sessionstart(session: pytest.Session) -> None:
    out = os.environ.get("SUITE_CPU_OUT")
    if out and not os.environ.get("PYTEST_XDIST_WORKER") and os.path.exists("/proc/stat"):  # the controller
        stop = session.config.stash[_STOP_SAMPLING] = threading.Event()
        threading.Thread(target=_sample_busy_cores, args=(out + _CORES_SUFFIX, stop), daemon=True).start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    stop = session.config.stash.get(_STOP_SAMPLING, None)
    if stop is not None:
        stop.set()


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


def print_idle(rows: list[CpuOfTest], samples: list[BusyCores], most: int) -> None:
    """How busy the cores were while tests ran, and the tests that were running while they idled."""
    first, last = min(r.start for r in rows), max(r.start + r.wall for r in rows)
    inside = [s for s in samples if first <= s.at - 1.0 and s.at <= last]
    if not inside:
        print("no samples of busy cores inside the run")
        return
    idle_of: collections.defaultdict[str, float] = collections.defaultdict(float)
    for sample in inside:
        middle = sample.at - 0.5
        running = [r.id for r in rows if r.start <= middle < r.start + r.wall] or ["(between tests)"]
        for test in running:
            idle_of[test] += (sample.cores - sample.busy) / len(running)
    idle = sum(s.cores - s.busy for s in inside)
    print(f"{len(inside)} s of the run sampled: {sum(s.busy for s in inside) / len(inside):.2f} of "
          f"{inside[0].cores} cores busy on average, {idle:.0f} idle core-seconds")
    print(f"{'idle s':>8}  test running while cores were idle")
    for test, seconds in sorted(idle_of.items(), key=lambda item: -item[1])[:most]:
        print(f"{seconds:8.1f}  {test}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path")
    parser.add_argument("--tests", action="store_true", help="one row per test, not per file")
    parser.add_argument("--idle", action="store_true", help="the cores' idle time, by the tests running then")
    parser.add_argument("--most", type=int, default=40)
    args = parser.parse_args()
    with open(args.path) as f:
        rows = [CpuOfTest(**json.loads(line)) for line in f]
    if args.idle:
        with open(args.path + _CORES_SUFFIX) as f:
            print_idle(rows, [BusyCores(**json.loads(line)) for line in f], args.most)
        return
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
