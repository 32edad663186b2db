"""Log every python process of a test run: one JSON line each, as it exits (bench/suite_procs.py).

Python imports ``sitecustomize`` from sys.path at start-up, so with this directory on PYTHONPATH
(inherited by every subprocess) each python process the suite starts logs itself, once
SUITE_PROC_LOG names the file to append to. A line holds what the process was started as, whether
it imported torch / Dynamo / Inductor, and its own CPU seconds (RUSAGE_SELF: a forked child counts
from its fork). Exits through ``os._exit`` (forked children, fork servers) are logged too; a process
killed by a signal is not. Non-python processes (gcc, Chromium) are not either.
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import sys
import time

_STARTED = time.time()
_LOG = os.environ.get("SUITE_PROC_LOG")


def _log() -> None:
    if not _LOG:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    line = {"pid": os.getpid(), "ppid": os.getppid(), "argv": list(getattr(sys, "orig_argv", sys.argv))[:8],
            "torch": "torch" in sys.modules, "dynamo": "torch._dynamo" in sys.modules,
            "inductor": "torch._inductor.compile_fx" in sys.modules,
            "cpu": usage.ru_utime + usage.ru_stime, "wall": time.time() - _STARTED,
            "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]}
    try:
        with open(_LOG, "a") as f:
            f.write(json.dumps(line) + "\n")
    except OSError:
        pass


if _LOG:
    atexit.register(_log)
    _os_exit = os._exit

    def _logged_exit(status: int) -> None:
        _log()
        _os_exit(status)

    os._exit = _logged_exit  # type: ignore[assignment]
