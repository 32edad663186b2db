"""The detection run: the user's program under the recorder and the failure probe.

Started by the launcher as ``python -m dynscope.minifier.child SPEC`` (like
dynscope.runner.child, which it mirrors). The program runs exactly as under python until its
first failing graph; the probe then records the failure and stops it.
"""

from __future__ import annotations

import json
import sys

from dynscope.errors import DynscopeError
from dynscope.runner.child import start_recording
from dynscope.runner.interrupts import report_sigints
from dynscope.runner.program import Program, UserProgramError, run_program

STOPPED_AT_FAILURE = 0  # exit status once the failure is recorded: the parent reads failure.json


def main() -> None:
    spec = json.loads(sys.argv[1])
    report_sigints(spec.get("sigint_notes_fd"))  # first: a Ctrl-C during startup is noted too
    program = Program(**spec["program"])
    options = spec["minify"]
    recorder = start_recording(spec)
    # Imported after the recorder starts: both import torch, which the recorder times.
    from dynscope.minifier.probe import FailureProbe, StopProgram

    probe = FailureProbe(options["out_dir"], accuracy=options.get("accuracy")).install()
    try:
        run_program(program)
    except UserProgramError as e:
        probe.remove()
        if isinstance(e.exc, StopProgram):
            recorder.record_exception(e.exc.original)
            recorder.stop()
            print("dynscope: stopped the program at its first failing graph", file=sys.stderr)
            sys.exit(STOPPED_AT_FAILURE)
        recorder.record_exception(e.exc)
        recorder.stop()
        e.report_and_exit()
    except DynscopeError as e:
        probe.remove()
        recorder.stop()
        print(f"dynscope: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    except SystemExit:
        probe.remove()
        recorder.stop()
        raise
    probe.remove()
    recorder.stop()


if __name__ == "__main__":
    main()
