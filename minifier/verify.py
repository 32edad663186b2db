"""Prove a repro in a fresh process: run it as ``python repro.py`` would and report how it failed.

The parent starts ``python -m dynscope.minifier.verify REPRO OUT``. This process installs
only the backend-call hook that tells compile errors from runtime errors (the repro's code
runs unchanged), runs the script as __main__, and writes the failure's signature as JSON to
OUT. A crash or a hang shows in the process's exit status and the parent's timeout.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import subprocess
import sys

from dynscope.minifier.signature import Signature, crash_signature, hang_signature
from dynscope.runner.cache_dirs import cache_environment
from dynscope.runner.fork_client import module_command
from dynscope.runner.interpreter import child_environment


def verify(repro_path: str, *, timeout: float, log_path: str, cache_dir: str | None = None) -> Signature | None:
    """How the repro fails in a fresh process (None: it ran cleanly). ``cache_dir``: the
    directory of its compile caches (minify's private one); None: the environment's."""
    out = repro_path + ".verdict.json"
    if os.path.exists(out):
        os.remove(out)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([*module_command("dynscope.minifier.verify"), repro_path, out],
                                stdout=log, stderr=log, cwd=os.path.dirname(os.path.abspath(repro_path)),
                                env={**child_environment(), **(cache_environment(cache_dir) if cache_dir else {})},
                                start_new_session=True)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return hang_signature(timeout)
    if not os.path.exists(out):
        return crash_signature(returncode)
    with open(out) as f:
        verdict = json.load(f)
    os.remove(out)
    return Signature.from_json(verdict.get("signature"))


def main() -> None:
    repro_path, out = sys.argv[1], sys.argv[2]
    from dynscope.minifier.probe import CompileWatch
    from dynscope.minifier.signature import from_exception

    # As `python repro.py` would run it, but without its directory on sys.path: repro.py imports
    # only torch, and a module planted beside it must not replace torch's.
    sys.argv = [repro_path]
    signature = None
    with CompileWatch() as watch:
        try:
            runpy.run_path(repro_path, run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                signature = from_exception(e, "runtime_error")
        except Exception as e:
            signature = from_exception(e, watch.kind_of(e))
            import traceback

            traceback.print_exc()
    with open(out, "w") as f:
        json.dump({"signature": signature.to_json() if signature else None}, f)


if __name__ == "__main__":
    main()
