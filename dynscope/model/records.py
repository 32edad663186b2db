"""Typed records of a capture. Every view (summary, TUI, reports, minifier) reads these.

Records are plain frozen dataclasses built from capture rows; large texts (stage IR,
kernel source) are fetched lazily through the owning Capture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from dynscope.events import EXPLAIN_VALUE_OPTIONS as contract_explain_options
from dynscope.events import ChildCapture
from dynscope.store.json_text import JsonObject

# A file of the standard library (any CPython's, on POSIX: /usr/lib/python3.11/logging/__init__.py,
# ~/.pyenv/.../lib/python3.11/...) or of torch itself, as a frame of a break's user stack names it.
_LIBRARY_FILE = re.compile(r"/lib(?:64)?/python\d+\.\d+t?/(?!(?:site|dist)-packages/)|/(?:site|dist)-packages/torch/")


def library_file(path: str | None) -> bool:
    """Whether ``path`` is in the standard library or torch (never the user's code to change)."""
    if not path:
        return False
    return path.startswith("<frozen ") or _LIBRARY_FILE.search(path) is not None


# "failed": torch's metrics name a failure; "skipped": no graph; "incomplete": the run ended mid-compile.
CompileStatus = Literal["ok", "failed", "skipped", "incomplete"]

# `dynscope explain` options that take a value (the explain command parses with the same set).
EXPLAIN_VALUE_OPTIONS = contract_explain_options


@dataclass(frozen=True)
class StackFrame:
    file: str | None
    line: int | None
    function: str | None
    code: str | None = None  # the source line, when torch recorded it
    # What identifies the line across edits, where dynscope recorded it (graph breaks): the
    # qualified name of its function, the whole statement the line belongs to and the nearest
    # statements above and below, nearest first (events.BreakFrame).
    qualname: str | None = None
    statement: str | None = None
    above: tuple[str, ...] = ()
    below: tuple[str, ...] = ()


@dataclass(frozen=True)
class Run:
    path: str
    dynscope_version: str | None
    torch_version: str | None
    python: str | None
    command: list[str]
    cwd: str | None
    hostname: str | None
    pid: int | None
    rank: int | None
    world_size: int | None
    started: float | None
    finished: float | None
    exit_code: int | None
    signal: int | None
    keep_caches: bool
    device: JsonObject  # what the recorder saw of the machine (cuda, cuda_device, triton...): read as untrusted JSON
    probes: dict[str, bool]
    probe_details: dict[str, str]
    probe_errors: int
    # What `dynscope import` read from TORCH_TRACE logs (files, events, unreadable lines...); None for explain.
    imported: JsonObject | None = None
    # Why the capture is incomplete (recording was cut: a full disk, a killed recorder); None when whole.
    incomplete: str | None = None
    # Child processes (os.fork, multiprocessing workers) that recorded a capture of their own beside this one.
    child_captures: tuple[ChildCapture, ...] = ()
    parent_pid: int | None = None  # set in a child process's own capture

    @property
    def compiling_children(self) -> tuple[ChildCapture, ...]:
        return tuple(c for c in self.child_captures if c.compiles > 0)

    @property
    def ended(self) -> bool:
        """False when the capture has no record of the run's end (the whole process tree died)."""
        return self.finished is not None

    @property
    def duration_s(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return self.finished - self.started

    @property
    def outcome(self) -> str:
        """How the run ended, in a few words: "exit 0", "killed by signal 9", "did not finish"."""
        if self.signal:
            return f"killed by signal {self.signal}"
        if self.exit_code is not None:
            return f"exit {self.exit_code}"
        return "did not finish"

    @property
    def program_command(self) -> list[str]:
        """The user's own command: what came after ``dynscope explain`` and its options
        (``dynscope explain -o rc.dynscope train.py --epochs 1`` -> ``train.py --epochs 1``;
        ``dynscope numerics`` records its program's command right after its name)."""
        if self.command[:2] != ["dynscope", "explain"] and self.command[:2] != ["dynscope", "numerics"]:
            return self.command
        rest = self.command[2:]
        i = 0
        while i < len(rest):
            token = rest[i]
            if token == "--":
                return rest[i + 1:]
            if token == "-m" or not token.startswith("-"):
                return rest[i:]
            if token.startswith("-m") and not token.startswith("--"):  # -mpkg.module
                return rest[i:]
            i += 2 if token in EXPLAIN_VALUE_OPTIONS else 1
        return []


@dataclass(frozen=True)
class ProgramException:
    """An uncaught exception that ended the user's program."""

    type: str
    module: str
    message: str
    traceback: str


@dataclass(frozen=True)
class Frame:
    """A code object Dynamo compiled (torch's frame id)."""

    frame_id: int | None
    function: str
    file: str | None
    line: int | None
    compile_ids: tuple[str, ...]


@dataclass(frozen=True)
class CompileTimes:
    """Where one compile's time went, in seconds (None: the stage did not run or was not timed)."""

    total: float | None = None
    dynamo: float | None = None  # bytecode tracing, graph building, guards
    aot_autograd: float | None = None  # or the whole backend, for non-AOT backends
    inductor: float | None = None  # lowering, passes, scheduling
    codegen: float | None = None  # Python/C++/Triton generation and compilation
    backward: float | None = None  # lazily compiled backward graph

    def by_stage(self) -> dict[str, float]:
        stages = {
            "dynamo": self.dynamo,
            "aot_autograd": self.aot_autograd,
            "inductor": self.inductor,
            "codegen": self.codegen,
            "backward": self.backward,
        }
        return {k: v for k, v in stages.items() if v}


@dataclass(frozen=True)
class Compile:
    compile_id: str
    frame_id: int | None
    frame_compile_id: int | None
    attempts: int  # 1 + restarts (a graph break restarts the analysis)
    function: str
    file: str | None
    line: int | None
    status: CompileStatus
    fail_type: str | None
    fail_reason: str | None
    fail_file: str | None
    fail_line: int | None
    started: float | None
    times: CompileTimes
    graph_op_count: int | None
    graph_node_count: int | None
    guard_count: int | None
    restart_reasons: tuple[str, ...]
    user_stack: tuple[StackFrame, ...]  # where the compiled function was called from
    guard_latency_s: float | None = None  # torch's measurement of one guard check of this compile
    cudagraph_skip_reason: str | None = None  # mode="reduce-overhead": why CUDA graphs were not used

    @property
    def is_recompile(self) -> bool:
        return bool(self.frame_compile_id)


@dataclass(frozen=True)
class GraphBreak:
    """One graph break, as torch logged it."""

    event_id: int
    compile_id: str | None
    attempt: int | None
    gb_type: str | None
    gb_id: str | None
    doc_link: str | None
    message: str  # torch's counters["graph_break"] key
    reason: str  # the text after "Graph Break Reason:" in torch's graph-break log
    headline: str
    explanation: str | None
    hints: tuple[str, ...]
    developer_context: str | None
    user_stack: tuple[StackFrame, ...]
    traced_function: str | None
    traced_line: int | None
    resumed_into: str | None  # the resume function Dynamo continues in, when one was compiled
    # What the break cost beyond a split graph, as a fact torch recorded ("inside a loop: the
    # whole frame fell back to eager"), and whether the frame it was in then ran in eager.
    consequence: str | None = None
    frame_skipped: bool = False

    @property
    def location(self) -> StackFrame:
        """Where the break is: the innermost frame of the user's own code (torch's 'Graph break in
        user code at'). A break Dynamo hit while tracing into the standard library or torch
        (``logger.info`` inlined into ``logging/__init__.py``) is placed at the user's line that
        called into them, the line to change; ``inner_location`` keeps where it happened."""
        for frame in reversed(self.user_stack):
            if not library_file(frame.file):
                return frame
        return self.user_stack[-1] if self.user_stack else StackFrame(None, None, self.traced_function)

    @property
    def inner_location(self) -> StackFrame | None:
        """The frame inside the standard library or torch the break happened in, when ``location``
        is the user's line that called into it; else None."""
        inner = self.user_stack[-1] if self.user_stack else None
        return inner if inner is not None and inner is not self.location else None


@dataclass(frozen=True)
class GuardFailure:
    """One cached compile's guards rejecting a call."""

    failed_compile_id: str
    reason: str  # torch's text, e.g. "tensor 'x' size mismatch at index 0. expected 4, actual 5"
    guard: str | None  # the failing check, e.g. "n == 2"
    expected: str | None
    actual: str | None
    user_code: str | None  # the user line that created the guard, when torch says


@dataclass(frozen=True)
class Recompile:
    compile_id: str  # the new compile
    function: str
    file: str | None
    line: int | None
    reason: str  # torch's recompile reason (its first line: the newest cache entry's failure)
    failures: tuple[GuardFailure, ...]  # one per cached compile that was rejected


@dataclass(frozen=True)
class CompileError:
    compile_id: str
    function: str
    file: str | None
    line: int | None
    fail_type: str
    reason: str
    user_file: str | None
    user_line: int | None


@dataclass(frozen=True)
class SkippedFrame:
    """A frame Dynamo gave up on without failing the program: it ran in eager instead.

    Torch calls these "soft" failures (convert_frame: Unsupported / UserError): a graph break it
    could not handle (inside a loop, in a try block, at the top of a resume function, an
    exception it could not trace). The program's results are unaffected; the cost is speed.
    """

    compile_id: str
    function: str
    file: str | None
    line: int | None
    fail_type: str
    reason: str  # torch's whole message
    headline: str  # its first line: the break's type, e.g. "Data dependent operator"
    user_file: str | None  # where the break that caused it is, when torch says
    user_line: int | None


@dataclass(frozen=True)
class RecompileLimitHit:
    """A frame recompiled so often that Dynamo stopped compiling it: from this compile on,
    calls that match no cached graph run in eager."""

    compile_id: str
    function: str
    file: str | None
    line: int | None
    limit: int | None  # the limit's value, as torch's message says it
    limit_name: str  # torch's config name: "recompile_limit" (formerly cache_size_limit) or "accumulated_recompile_limit"
    fatal: bool  # torch raised it into the program (fullgraph=True or fail_on_recompile_limit_hit)


@dataclass(frozen=True)
class Guard:
    compile_id: str
    kind: str  # TENSOR_MATCH, ID_MATCH, TYPE_MATCH, EQUALS_MATCH, ...
    source: str | None  # the guarded value, e.g. L['x']
    check: str  # torch's check expression
    user_code: str | None  # the user line that introduced it
    user_location: str | None  # "file.py:12 in forward"


@dataclass(frozen=True)
class Stage:
    """One step of a compile's pipeline (see dynscope.model.stages for the order)."""

    compile_id: str
    name: str  # canonical: bytecode, dynamo, aot_joint, ..., output_code, kernel
    graph: str | None  # "forward" | "backward" | "inference" for per-graph stages
    key: str  # unique within the compile: "post_grad", "post_grad.backward", "kernel:cpp_fused_0"
    recorded: bool
    missing_reason: str | None
    language: str  # "fx" | "bytecode" | "python" | "cpp" | "triton" | "text"
    event_id: int | None = None
    payload_hash: str | None = None
    size: int = 0
    variants: dict[str, str] = field(default_factory=dict)  # other views of the stage: name -> payload hash
    structure_hash: str | None = None  # structural FX graph (JSON), when captured
    node_count: int | None = None


@dataclass(frozen=True)
class Kernel:
    compile_id: str
    graph: str | None
    name: str
    language: str  # "cpp" | "triton" | "extern"
    source: str
    launch: str | None  # the wrapper line that runs it
    compile_time_s: float | None
    post_grad_nodes: tuple[str, ...]
    origin_nodes: tuple[str, ...]  # pre-decomposition (Dynamo graph) node names
    source_lines: tuple[StackFrame, ...]
    provenance: str | None  # how the mapping was made: "torch" (inductor's provenance tracking) | "comments" | None

    @property
    def key(self) -> str:
        suffix = ".backward" if self.graph == "backward" else ""
        return f"kernel:{self.name}{suffix}"
