"""What one `dynscope` command costs before it does its work: bytecode and the parser.

The security tests and most integration tests run the CLI as a process of its own, hundreds of
times a session, so its start-up is a share of the suite's CPU (issue 21). Three set-ups run the
same `dynscope summary` of a recorded capture, interleaved, in this one run:

- "from source": no .pyc to read (an editable install under PYTHONDONTWRITEBYTECODE=1, as on the
  CI machines, compiles every module it imports, every time);
- "bytecode, whole parser": .pyc files read, and every subcommand's module imported to build the
  parser (what `dynscope` did before it built only the subcommand it runs);
- "bytecode": .pyc files read, and only `summary`'s module imported (what it does now).

Each set-up's .pyc files live under a PYTHONPYCACHEPREFIX of its own (python then reads no other):
the checkout is not touched.

    python bench/cli_startup.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CAPTURE = REPO / "tests" / "data" / "captures" / "2.13.0+cpu" / "graph_breaks_eager.dynscope"
# `dynscope` as it was: main() builds every subcommand's parser, whichever one it runs.
WHOLE_PARSER = ("import sys\nfrom dynscope import commands\nbuild = commands.build_parser\n"
                "commands.build_parser = lambda only=None: build()\nsys.exit(commands.main(sys.argv[1:]))\n")


def cpu_seconds(argv: list[str], prefix: str, *, write: bool = False) -> float:
    """User + system CPU of one run (wait4's rusage of that child alone); ``write``: let it write
    the .pyc files of what it imports under ``prefix``."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": prefix}
    if write:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    summary = ["summary", str(CAPTURE)]
    with tempfile.TemporaryDirectory() as without_ours, tempfile.TemporaryDirectory() as compiled:
        setups = {
            "from source": ([sys.executable, "-m", "dynscope", *summary], without_ours),
            "bytecode, whole parser": ([sys.executable, "-c", WHOLE_PARSER, *summary], compiled),
            "bytecode": ([sys.executable, "-m", "dynscope", *summary], compiled),
        }
        # Every module any set-up imports gets its .pyc (the standard library's, rich's: as an install
        # has them); then "from source" loses dynscope's own.
        for prefix in (without_ours, compiled):
            cpu_seconds(setups["bytecode, whole parser"][0], prefix, write=True)
        shutil.rmtree(without_ours + str(REPO))
        times: dict[str, list[float]] = {name: [] for name in setups}
        for _ in range(args.repeat):
            for name, (argv, prefix) in setups.items():
                times[name].append(cpu_seconds(argv, prefix))
    base = statistics.median(times["from source"])
    print(f"dynscope summary of {CAPTURE.name}: median CPU of {args.repeat} runs each, interleaved")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<24} {median:6.3f} s   {median / base:5.2f}x")


if __name__ == "__main__":
    main()
