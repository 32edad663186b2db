"""What the reader's safety checks cost (issue 20, item 6), side by side with the reader before them.

    python bench/open_checks.py [--capture PATH] [--compiles 1000] [--target-mb 500] [--rounds 7]
                                [--baseline-rev 7795f69]

The checks: special files refused before open; a read-only connection with a progress
handler (a time budget per query), SQLite's length limit, trusted_schema off and
cell_size_check on; sqlite_master compared with the capture schema before any query; every
row's values checked for their type; JSON decoded with a depth bound.

"before" is the CaptureReader of --baseline-rev (the commit before the checks), loaded from
git into this process; "after" is the working tree's. Both read the same file with the same
model, in alternating rounds (before/after, then after/before...), so drift on a busy machine
falls on both; CPU time and wall time are both printed. Three tasks, each from a fresh reader:

  open      the reader alone: header, connection, (schema check), meta
  overview  open + what `dynscope summary` reads (compiles, breaks, recompiles, every record)
  events    open + every event of the capture read and decoded (all metadata through JSON)

The capture (1,000 compiles, ~150 MB by default) is made once by bench/make_large_capture.py
from the recorded captures in tests/data (no compile needed) and cached. Nothing is
asserted: medians and the after/before ratio are printed, measured in this run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from make_large_capture import CACHE, make_large_capture  # noqa: E402

from dynscope.analysis.run_view import RunView  # noqa: E402
from dynscope.analysis.summary import summary_document  # noqa: E402
from dynscope.model import Capture  # noqa: E402
from dynscope.store.reader import CaptureReader  # noqa: E402

TEMPLATES = REPO / "tests" / "data" / "captures"


def large_capture(compiles: int, target_mb: float) -> Path:
    path = CACHE / f"open-checks-{compiles}-{target_mb:g}mb.dynscope"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        versions = [d for d in TEMPLATES.iterdir() if d.is_dir()]  # one torch version's recorded captures
        newest = max(versions, key=lambda d: tuple(int(x) for x in d.name.split("+")[0].split(".")))
        partial = path.with_suffix(".partial")
        make_large_capture(str(partial), compiles=compiles, target_mb=target_mb,
                           templates=sorted(newest.glob("*.dynscope")))
        os.replace(partial, path)
    return path


def baseline_reader(rev: str, source_file: Path | None = None) -> type:
    """CaptureReader as it was at ``rev``, loaded from git, or from ``source_file`` where there
    is no git (it imports today's helpers, which it uses the same way)."""
    if source_file is not None:
        source = source_file.read_text()
    else:
        source = subprocess.run(["git", "show", f"{rev}:dynscope/store/reader.py"], cwd=REPO, check=True,
                                capture_output=True, text=True).stdout
    module = types.ModuleType("baseline_reader")
    module.__file__ = f"<{rev}:dynscope/store/reader.py>"
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module.CaptureReader


def task_open(reader_class, path: str) -> None:
    reader_class(path).close()


def task_overview(reader_class, path: str) -> None:
    with Capture(reader_class(path)) as capture:
        summary_document(RunView(capture))  # a fresh view: the whole derivation is timed each time
        capture.not_understood()


def task_events(reader_class, path: str) -> None:
    reader = reader_class(path)
    reader.events()
    reader.close()


TASKS = {"open": task_open, "overview": task_overview, "events": task_events}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capture", type=Path, help="use this capture instead of making one")
    parser.add_argument("--compiles", type=int, default=1000)
    parser.add_argument("--target-mb", type=float, default=500.0)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline-rev", default="7795f69", help="the commit whose reader is 'before'")
    parser.add_argument("--baseline-file", type=Path,
                        help="that reader's source (`git show REV:dynscope/store/reader.py`), where git is not")
    args = parser.parse_args()
    path = str(args.capture or large_capture(args.compiles, args.target_mb))
    variants = {"before": baseline_reader(args.baseline_rev, args.baseline_file), "after": CaptureReader}
    with Capture.open(path) as model:
        events = sum(model.reader.name_counts().values())
        print(f"capture: {path} ({os.path.getsize(path) / 1e6:.0f} MB, {len(model.compiles())} compiles, "
              f"{events} events); before = {args.baseline_rev}, after = working tree; {args.rounds} rounds")
    for name, task in TASKS.items():
        for reader_class in variants.values():  # warm the page cache and the imports
            task(reader_class, path)
        cpu: dict[str, list[float]] = {v: [] for v in variants}
        wall: dict[str, list[float]] = {v: [] for v in variants}
        for i in range(args.rounds):
            order = list(variants) if i % 2 == 0 else list(reversed(variants))
            for variant in order:
                started, started_cpu = time.perf_counter(), time.process_time()
                task(variants[variant], path)
                cpu[variant].append(time.process_time() - started_cpu)
                wall[variant].append(time.perf_counter() - started)
        # CPU time is the figure: the file is in the page cache, so reading it is CPU work, and
        # CPU time moves less than wall time when other processes share the machine.
        for label, times in (("cpu", cpu), ("wall", wall)):
            before, after = (statistics.median(times[v]) for v in ("before", "after"))
            ratios = sorted(a / b for a, b in zip(times["after"], times["before"]))
            print(f"{name:9s} {label:4s} before {before * 1e3:8.1f} ms   after {after * 1e3:8.1f} ms   "
                  f"after/before {after / before:5.2f} (median of per-round ratios {statistics.median(ratios):.2f}, "
                  f"range {ratios[0]:.2f}-{ratios[-1]:.2f})")


if __name__ == "__main__":
    main()
