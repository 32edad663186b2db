"""The process that runs the user's program under the recorder.

The launcher starts it as ``python -m dynscope.runner.child SPEC`` with the user's stdin,
stdout and stderr; everything it prints is the user's program's own output.
"""

from __future__ import annotations

import json
import os
import sys

from dynscope.errors import DynscopeError
from dynscope.model.fix import ENV
from dynscope.recorder import Recorder
from dynscope.runner.interrupts import report_sigints
from dynscope.runner.program import Program, UserProgramError, run_program


def start_recording(spec: dict) -> Recorder:
    """The recorder the launcher's spec asks for, started (or one line and exit if it can't be)."""
    recorder = Recorder(spec["capture"], keep_caches=spec["keep_caches"], command=spec["command"],
                        profile=spec.get("profile", False), force_eager=spec.get("force_eager", False))
    try:
        recorder.start()
    except DynscopeError as e:
        print(f"dynscope: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    return recorder


def main() -> None:
    spec = json.loads(sys.argv[1])
    report_sigints(spec.get("sigint_notes_fd"))  # first: a Ctrl-C during startup is noted too
    program = Program(**spec["program"])
    recorder = start_recording(spec)
    workdir = None
    if ENV in os.environ:  # a trial of `dynscope fix`: apply its remedies before the program runs
        from dynscope.fix.apply import install_from_env

        workdir = install_from_env(recorder)  # and run it in a scratch copy of this directory
    try:
        run_program(program, workdir=workdir)
    except UserProgramError as e:
        recorder.record_exception(e.exc)
        recorder.stop()
        e.report_and_exit()
    except DynscopeError as e:
        recorder.stop()
        print(f"dynscope: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    except SystemExit:
        recorder.stop()
        raise
    recorder.stop()


if __name__ == "__main__":
    main()
