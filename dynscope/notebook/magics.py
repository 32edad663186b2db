"""The ``%dynscope`` / ``%%dynscope`` magics.

    %%dynscope [-o PATH] [--profile] [--keep-caches]   this cell under a new capture, then its summary
    %dynscope start [-o PATH] [--profile] [--keep-caches]   one capture for every cell until stop
    %dynscope stop                                       end that capture and show its summary
    %dynscope open PATH                                  show an existing capture

A ``%%dynscope`` cell gets a capture of its own (``dynscope-notebook/In<N>-<time>.dynscope`` unless
``-o`` names one), so re-running a cell never mixes two runs. Compiles spread over several cells
(a model compiled in one, called with new shapes in the next) go into one capture with
``%dynscope start`` ... ``%dynscope stop``: everything compiled in between, in any cell, is recorded.
The cell runs through IPython's own ``run_cell`` (as ``%%capture`` does): its magics, its last
value and its traceback behave as in a plain cell, and its lines keep the numbers the notebook shows.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display as _display

from dynscope.errors import DynscopeError
from dynscope.notebook.display import CaptureView, cell_label

if TYPE_CHECKING:
    from dynscope.model import Capture
    from dynscope.recorder import Recorder

DEFAULT_DIRECTORY = "dynscope-notebook"

display: Callable[..., None] = _display  # IPython's display, typed for the checker

USAGE = """\
%%dynscope [-o PATH] [--profile] [--keep-caches]   run this cell under a new capture and show its summary
%dynscope start [-o PATH] [--profile] [--keep-caches]   record every cell into one capture until %dynscope stop
%dynscope stop                                       end that recording and show its summary
%dynscope open PATH                                  show an existing capture"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a mistake as IPython's one-line UsageError instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"dynscope: {message}\n{USAGE}")


def _recording_parser(prog: str) -> _Parser:
    parser = _Parser(prog=prog, add_help=False)
    parser.add_argument("-o", "--output", metavar="PATH", help="the capture file (default: one under dynscope-notebook/)")
    parser.add_argument("--profile", action="store_true", help="also time every compiled graph (as explain --profile)")
    parser.add_argument("--keep-caches", action="store_true", help="keep torch's compile caches on (as explain does by default)")
    return parser


@dataclass(frozen=True)
class RecordingOptions:
    output: str | None
    profile: bool
    keep_caches: bool

    @classmethod
    def parse(cls, prog: str, words: list[str]) -> RecordingOptions:
        args = _recording_parser(prog).parse_args(words)
        return cls(output=args.output, profile=args.profile, keep_caches=args.keep_caches)


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as e:
        raise UsageError(f"dynscope: {e}\n{USAGE}") from None


def capture_path(requested: str | None, stem: str) -> str:
    """The file a recording goes to: ``requested``, which may replace an earlier capture but no
    other file, or a new name under dynscope-notebook/."""
    from dynscope.store.header import is_capture_file

    if requested is not None:
        if os.path.isdir(requested):
            raise UsageError(f"dynscope: -o {requested} is a directory; name the capture file")
        if os.path.exists(requested) and not is_capture_file(requested):
            raise UsageError(f"dynscope: refusing to overwrite {requested}: it is not a dynscope capture")
        return requested
    os.makedirs(DEFAULT_DIRECTORY, exist_ok=True)
    base = os.path.join(DEFAULT_DIRECTORY, f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}")
    path, n = f"{base}.dynscope", 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}.dynscope"
    return path


def _start(options: RecordingOptions, stem: str, command: list[str]) -> Recorder:
    from dynscope.errors import CaptureError
    from dynscope.recorder import Recorder

    recorder = Recorder(capture_path(options.output, stem), keep_caches=options.keep_caches,
                        profile=options.profile, command=command)
    try:
        return recorder.start()
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        raise UsageError("dynscope: recording needs torch, which this kernel cannot import") from None
    except (CaptureError, OSError) as e:
        recorder.stop()
        raise UsageError(f"dynscope: cannot record: {e}") from None


@magics_class
class DynscopeMagics(Magics):
    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.session: Recorder | None = None  # between %dynscope start and %dynscope stop
        atexit.register(self._end_session)  # the kernel shuts down mid-session: the capture is closed whole

    @property
    def _shell(self) -> Any:
        """IPython's shell (Magics types it optional; a registered magic always has one)."""
        assert self.shell is not None, "a registered magic runs in a shell"
        return self.shell

    @line_cell_magic
    def dynscope(self, line: str, cell: str | None = None) -> CaptureView | None:
        if cell is not None:
            self._cell(line, cell)
            return None
        words = _words(line)
        action, rest = (words[0], words[1:]) if words else ("help", [])
        if action == "open":
            if len(rest) != 1:
                raise UsageError(f"dynscope: %dynscope open takes one capture file\n{USAGE}")
            try:
                return CaptureView.open(rest[0])
            except DynscopeError as e:
                raise UsageError(f"dynscope: {e}") from None
        if action == "start":
            self._start_session(RecordingOptions.parse("%dynscope start", rest))
            return None
        if action == "stop":
            if rest:
                raise UsageError(f"dynscope: %dynscope stop takes no arguments\n{USAGE}")
            return self._stop_session()
        if action in ("help", "-h", "--help"):
            print(USAGE)
            return None
        raise UsageError(f"dynscope: unknown action {action!r}\n{USAGE}")

    # -- %%dynscope -------------------------------------------------------------------------

    def _cell_number(self) -> int:
        """This cell's In[N]: IPython counts the running cell before running it."""
        return max(1, int(self._shell.execution_count) - 1)

    def _cell(self, line: str, cell: str) -> None:
        number = self._cell_number()
        options = RecordingOptions.parse("%%dynscope", _words(line))
        if self.session is not None:
            raise UsageError(f"dynscope: %dynscope start is recording into {self.session.path}: every cell goes "
                             "there already; run this cell without %%dynscope, or %dynscope stop first")
        recorder = _start(options, f"In{number}", ["%%dynscope", f"In[{number}]"])
        result = None
        try:
            # The magic's line stays line 1 (as a comment): the cell's lines keep the numbers the
            # notebook shows, and IPython does not drop the body's leading blank lines.
            # Its code is named after this cell's number (In[N] in tracebacks and in the summary),
            # as IPython names a cell it runs by the count it is at.
            counted, self._shell.execution_count = self._shell.execution_count, number
            try:
                result = self._shell.run_cell(f"# %%dynscope {line}\n{cell}", store_history=False)
            finally:
                self._shell.execution_count = counted
        finally:
            error = None if result is None else (result.error_before_exec or result.error_in_exec)
            if error is not None:
                recorder.record_exception(error)
            recorder.stop(exit_code=0 if result is not None and error is None else 1)
        display(CaptureView(recorder.path))

    # -- %dynscope start / stop -------------------------------------------------------------

    def _start_session(self, options: RecordingOptions) -> None:
        if self.session is not None:
            raise UsageError(f"dynscope: already recording into {self.session.path} (%dynscope stop ends it)")
        number = self._cell_number()
        self.session = _start(options, "session", ["%dynscope", "start", f"In[{number}]"])
        print(f"dynscope: recording every cell into {self.session.path} until %dynscope stop")

    def _stop_session(self) -> CaptureView:
        recorder = self._end_session()
        if recorder is None:
            raise UsageError("dynscope: nothing is recording (%dynscope start begins a recording)")
        return CaptureView(recorder.path)

    def _end_session(self) -> Recorder | None:
        recorder, self.session = self.session, None
        if recorder is not None:
            recorder.stop(exit_code=0)
        return recorder


def _capture_html(capture: Capture) -> str:
    """``dynscope.open_capture(path)`` as a cell's value: its summary."""
    from dynscope.reporters.notebook import NotebookOptions, notebook_html

    return notebook_html(capture, NotebookOptions(file_labels=cell_label))


def register(ipython: Any) -> None:
    ipython.register_magics(DynscopeMagics)
    html = ipython.display_formatter.formatters["text/html"]
    html.for_type_by_name("dynscope.model.capture", "Capture", _capture_html)


def unregister(ipython: Any) -> None:
    magics = ipython.magics_manager.registry.get("DynscopeMagics")
    if isinstance(magics, DynscopeMagics):
        magics._end_session()
