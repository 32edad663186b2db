"""The process that runs the user's program under the recorder.

Started as ``python -m dynscope.runner.child SPEC`` (the launcher, with the user's stdin, stdout
and stderr: everything it prints is the user's program's own output), or forked from the fork
server (dynscope/runner/fork_server.py) with ``sys.argv`` set the same way. SPEC is a
:class:`~dynscope.runner.spec.ChildSpec` as JSON; the extensions it names (dynscope fix's
remedies, dynscope minify's failure probe) start once the recorder runs.
"""

from __future__ import annotations

import os
import sys

from dynscope.errors import DynscopeError
from dynscope.recorder import Recorder
from dynscope.runner.cache_dirs import cache_environment
from dynscope.runner.extensions import ChildHooks, remove_all, start_extensions, stop_for
from dynscope.runner.interrupts import report_sigints
from dynscope.runner.program import UserProgramError, run_program
from dynscope.runner.spec import ChildSpec, SpecError, spec_text


def start_recording(spec: ChildSpec) -> Recorder:
    """The recorder the spec asks for, started (or one line and exit if it can't be)."""
    if spec.cache_dir is not None:  # before torch reads them (and before the probes save the environment)
        os.environ.update(cache_environment(spec.cache_dir))
    recorder = Recorder(spec.capture, keep_caches=spec.keep_caches, command=list(spec.command),
                        profile=spec.profile, force_eager=spec.force_eager)
    try:
        recorder.start()
    except DynscopeError as e:
        print(f"dynscope: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    return recorder


def main() -> None:
    try:
        spec = ChildSpec.from_json(spec_text(sys.argv[1]))
    except (SpecError, IndexError) as e:
        print(f"dynscope: {e if isinstance(e, SpecError) else 'no child spec given'}", file=sys.stderr)
        sys.exit(2)
    report_sigints(spec.sigint_notes_fd)  # first: a Ctrl-C during startup is noted too
    recorder = start_recording(spec)
    hooks: list[ChildHooks] = []
    try:
        hooks = start_extensions(spec.extensions, recorder)
        run_program(spec.program, workdir=spec.workdir)
    except UserProgramError as e:
        stop = stop_for(hooks, e.exc)
        remove_all(hooks)
        if stop is not None:  # an extension ended the program on purpose
            recorder.record_exception(stop.record)
            recorder.stop()
            print(f"dynscope: {stop.message}", file=sys.stderr)
            sys.exit(stop.exit_code)
        recorder.record_exception(e.exc)
        recorder.stop()
        e.report_and_exit()
    except DynscopeError as e:
        remove_all(hooks)
        recorder.stop()
        print(f"dynscope: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    except SystemExit:
        remove_all(hooks)
        recorder.stop()
        raise
    remove_all(hooks)
    recorder.stop()


if __name__ == "__main__":
    main()
