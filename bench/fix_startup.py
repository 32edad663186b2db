"""Each run's start-up in `dynscope fix`: from the moment fix asks for a run to the program's start.

Runs ``dynscope fix ARGS`` in this process with the dynscope found on sys.path and times, per run,
its starter's ``start()`` call (fix asks for the run) against the run's first event, RunStart
(time.time() in the run's child once its recorder is ready, just before the program runs). It
wraps the starter classes of dynscope/fix/trials.py by their shape (``start`` and ``finish``), so
the same script times the code before the runner's fork server (a trial server that refused to
fork on CUDA builds: one ``dynscope explain`` process per run there) and after it. Prints one JSON
object (and writes it to $MEASURE_OUT, default measure.json).

    PYTHONPATH=CHECKOUT python bench/fix_startup.py LABEL fix --out out [--jobs 1] \\
        --try torch._dynamo.config.specialize_int=True --try torch._dynamo.config.cache_size_limit=16 \\
        graph_breaks.py --backend eager

(a copy of examples/graph_breaks.py: its 2 remedies, 2 settings tried and the combined run are 5
trials after the baseline). ``--out`` is required: the runs' captures are read from there.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import dynscope
import dynscope.fix.trials as trials
from dynscope.store.reader import CaptureReader

asked: dict[str, float] = {}
walls: dict[str, float] = {}
codes: dict[str, int] = {}


def _timed(cls: type) -> None:
    start, finish = cls.start, cls.finish  # type: ignore[attr-defined]

    def logged_start(self: Any, program: Any, run: Any, deadline: float) -> Any:
        asked.setdefault(run.name, time.time())  # a starter that hands over to another counts once
        return start(self, program, run, deadline)

    def logged_finish(self: Any, run: Any, returncode: int, wall_s: float) -> Any:
        walls[run.name], codes[run.name] = wall_s, returncode
        return finish(self, run, returncode, wall_s)

    cls.start, cls.finish = logged_start, logged_finish  # type: ignore[attr-defined]


def main() -> int:
    for name in dir(trials):
        cls = getattr(trials, name)
        if isinstance(cls, type) and callable(getattr(cls, "start", None)) and callable(getattr(cls, "finish", None)):
            _timed(cls)
    from dynscope.commands import main as dynscope_main

    began = time.time()
    code = dynscope_main(sys.argv[2:])
    total = time.time() - began
    out_dir = sys.argv[sys.argv.index("--out") + 1]
    rows = []
    for name, at in sorted(asked.items(), key=lambda kv: kv[1]):
        started = None
        try:
            with CaptureReader(os.path.join(out_dir, f"{name}.dynscope")) as reader:
                events = reader.events(["dynscope:run_start"])
                started = events[0].ts if events else None
        except Exception as e:  # noqa: BLE001  a run that wrote no capture: no start-up to report
            print(f"{name}: {e}", file=sys.stderr)
        rows.append({"run": name, "startup_s": None if started is None else round(started - at, 3),
                     "wall_s": round(walls.get(name, float("nan")), 3), "returncode": codes.get(name)})
    result = {"label": sys.argv[1], "dynscope": os.path.dirname(dynscope.__file__), "exit": code,
              "fix_wall_s": round(total, 2), "runs": rows}
    print(json.dumps(result))
    with open(os.environ.get("MEASURE_OUT", "measure.json"), "w") as f:
        json.dump(result, f, indent=1)
    return code


if __name__ == "__main__":
    sys.exit(main())
