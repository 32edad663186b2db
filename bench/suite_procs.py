"""Which processes a test run starts, and what they cost: the other half of bench/suite_cpu.py.

suite_cpu.py says which tests cost the most CPU; this says what kind of process spends it (a
recording child importing torch and Dynamo, a fork server, a forked trial, the CLI, Inductor's
vector-ISA probes), which is what a change to the runner or the test settings can save. With an
absolute PYTHONPATH (the tests run commands from directories of their own):

    SUITE_PROC_LOG=/tmp/procs.jsonl PYTHONPATH=$PWD/bench/proc_census python -m pytest -q -n 2 --dist loadfile tests/integration
    python bench/suite_procs.py /tmp/procs.jsonl

bench/proc_census/sitecustomize.py writes the lines (see there for what is and is not logged).
gcc is not logged, and timing it through a CXX wrapper script would change what is timed: torch
takes a compiler whose name is not g++ for clang and names the precompiled header ``.pch``, which
gcc ignores, so each kernel build took 2.6 s of CPU instead of 0.8 (torch 2.13, this machine).
A wrapper named ``g++``, first on PATH (``exec /usr/bin/time -a -o LOG /usr/bin/g++ "$@"``), is
still taken for gcc (``torch._inductor.cpp_builder._is_gcc`` is True): tests/integration/test_minify.py
alone ran 178 compiles for 70 s of CPU that way.
"""

from __future__ import annotations

import argparse
import collections
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessLine:
    """One line of SUITE_PROC_LOG."""

    pid: int
    ppid: int
    argv: list[str]
    torch: bool
    dynamo: bool
    inductor: bool
    cpu: float
    wall: float
    test: str


def kind_of(process: ProcessLine, by_pid: dict[int, ProcessLine]) -> str:
    """A short name for what the process was."""
    command = " ".join(process.argv[1:])
    if "cdll.LoadLibrary" in command:
        return "Inductor's vector-ISA probe"
    if "dynscope.runner.fork_server" in command:
        parent = by_pid.get(process.ppid)
        forked = parent is not None and parent.argv == process.argv
        return "forked child of a fork server" if forked else "fork server"
    if "dynscope.runner.child" in command:
        return "recording child (fresh python)"
    if "exec(eval(sys.stdin.readline()))" in command:
        return "pytest-xdist worker"
    if "-m dynscope" in command or process.argv[0].endswith("/dynscope"):
        return "dynscope CLI" + (" (imported torch)" if process.torch else "")
    return "other, with Dynamo" if process.dynamo else "other, with torch" if process.torch else "other python"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log")
    args = parser.parse_args()
    with open(args.log) as f:
        processes = [ProcessLine(**json.loads(line)) for line in f]
    by_pid = {p.pid: p for p in processes}
    cpu: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    for process in processes:
        kind = kind_of(process, by_pid)
        cpu[kind] += process.cpu
        count[kind] += 1
    print(f"{'CPU s':>8} {'processes':>9}  kind")
    for kind, seconds in sorted(cpu.items(), key=lambda item: -item[1]):
        print(f"{seconds:8.1f} {count[kind]:9d}  {kind}")
    print(f"{sum(cpu.values()):8.1f} {len(processes):9d}  in all (python processes only: gcc and browsers are not logged)")


if __name__ == "__main__":
    main()
