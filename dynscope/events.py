"""Every event kind a capture holds, and the shape of its data: the contract between what
writes a capture and what reads it.

Writers — dynscope's probes, the recorder, ``dynscope import``, ``dynscope minify`` — build
the records below and store them with ``write``; the model (dynscope.model) reads them back
with ``Record.parse``, which checks the type of every field it declares. An event whose data
does not have the declared shape, or whose kind nobody declared, is *not understood*: the
model counts it per kind (``Capture.not_understood()``) and the summary and reports say so
("2 events not understood: ..."), rather than guess or drop it silently.

Torch's structured-trace events keep torch's names and metadata (``TORCH_EVENTS``; artifacts
are stored as ``artifact:<name>``). Those the model reads fields of have a record here too,
with ``NESTED`` naming the key torch puts their fields under. Unknown extra fields are
ignored (torch adds fields in every release); a field may be absent unless it has no default.

Standard library only: imported by the probes (inside torch), by the reader (which never
imports torch) and by tests that run without torch.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar, Union

R = TypeVar("R", bound="Record")
T = TypeVar("T")


class NotUnderstood(ValueError):
    """An event whose data does not have the shape this contract declares for its kind."""

    def __init__(self, kind: str, why: str) -> None:
        super().__init__(f"{kind}: {why}")
        self.kind = kind
        self.why = why


@dataclasses.dataclass(frozen=True)
class Record:
    """One event kind's data. ``KIND`` is the event's name in the capture."""

    KIND: ClassVar[str]
    NESTED: ClassVar[str | None] = None  # torch's events: the metadata key holding the fields

    def to_metadata(self) -> dict[str, Any]:
        fields = _plain(dataclasses.asdict(self))
        return {self.NESTED: fields} if self.NESTED else fields

    @classmethod
    def parse(cls: type[R], metadata: Any) -> R:
        """The record from an event's metadata; NotUnderstood when its shape is not the declared one."""
        if cls.NESTED is not None:
            metadata = metadata.get(cls.NESTED) if isinstance(metadata, Mapping) else None
        if not isinstance(metadata, Mapping):
            raise NotUnderstood(cls.KIND, "its data is not an object")
        return _build(cls, metadata, cls.KIND)

    @classmethod
    def from_fields(cls: type[R], values: Mapping[str, Any]) -> R:
        """The record from fields extracted one by one (``json_paths``); None stands for absent."""
        return _build(cls, {k: v for k, v in values.items() if v is not None}, cls.KIND)

    @classmethod
    def parse_each(cls: type[R], data: Mapping[str, Any]) -> tuple[R, dict[str, str]]:
        """The record from whatever fields have the declared shape; the others take their default
        and are returned as {field: why} (for data where one bad field must not cost the rest)."""
        hints = typing.get_type_hints(cls)
        values, bad = {}, {}
        for f in dataclasses.fields(cls):
            if f.name in data and data[f.name] is not None:
                try:
                    values[f.name] = _check(hints[f.name])(data[f.name], cls.KIND, f.name)
                except NotUnderstood as e:
                    bad[f.name] = e.why
        return cls(**values), bad

    @classmethod
    def json_paths(cls) -> dict[str, str]:
        """SQLite JSON paths of the declared fields (CaptureReader.event_fields reads them without
        parsing whole metadata: torch's compile metrics carry ~10 KB of config per compile)."""
        prefix = f"$.{cls.NESTED}." if cls.NESTED else "$."
        return {f.name: prefix + f.name for f in dataclasses.fields(cls)}


class Appender(Protocol):
    """What a record is written to: a CaptureWriter, the Recorder (probes' Sink)."""

    def append(self, name: str, metadata: dict[str, Any], payload: str | None = None, *,
               compile_id: str | None = None, attempt: int | None = None,
               ts: float | None = None) -> int | None: ...


def write(sink: Appender, record: Record, payload: str | None = None, *, compile_id: str | None = None,
          attempt: int | None = None, ts: float | None = None) -> int | None:
    """Store one of dynscope's own events; returns its id."""
    return sink.append(record.KIND, record.to_metadata(), payload, compile_id=compile_id, attempt=attempt, ts=ts)


# -- dynscope's own events ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class RunStart(Record):
    KIND: ClassVar[str] = "dynscope:run_start"
    argv: tuple[str, ...] = ()
    keep_caches: bool = False


@dataclasses.dataclass(frozen=True)
class RunEnd(Record):
    KIND: ClassVar[str] = "dynscope:run_end"
    exit_code: int | None = None
    signal: int | None = None
    elapsed_s: float | None = None


@dataclasses.dataclass(frozen=True)
class ProbesRemoved(Record):
    KIND: ClassVar[str] = "dynscope:probes_removed"
    elapsed_s: float | None = None


@dataclasses.dataclass(frozen=True)
class ProgramRaised(Record):
    """The program's uncaught exception; the payload is its formatted traceback."""

    KIND: ClassVar[str] = "dynscope:exception"
    type: str = "?"
    module: str = ""
    message: str = ""


@dataclasses.dataclass(frozen=True)
class ProbeError(Record):
    KIND: ClassVar[str] = "dynscope:probe_error"
    message: str = ""


@dataclasses.dataclass(frozen=True)
class BreakFrame:
    """One frame of a graph break's user stack."""

    file: str | None = None
    line: int | None = None
    function: str | None = None
    code: str | None = None
    # What identifies the line across edits (dynscope.probes.source_lines): the qualified name of
    # the function it is in, the whole statement the line belongs to (its lines, stripped, joined
    # by newlines) and the nearest statements above and below it, nearest first. Absent in
    # captures recorded before dynscope recorded them.
    qualname: str | None = None
    statement: str | None = None
    above: tuple[str, ...] = ()
    below: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class GraphBreakSeen(Record):
    """One graph break, from the live exception (dynscope.probes.graph_breaks)."""

    KIND: ClassVar[str] = "dynscope:graph_break"
    gb_type: str | None = None
    gb_id: str | None = None
    doc_link: str | None = None
    exception: str | None = None
    message: str | None = None  # the text torch counts the break under (counters["graph_break"])
    reason: str | None = None  # the text after "Graph Break Reason:" in torch's graph-break log
    user_stack: tuple[BreakFrame, ...] = ()
    traced_function: str | None = None
    traced_file: str | None = None
    traced_line: int | None = None
    skip_frame: bool = False


@dataclasses.dataclass(frozen=True)
class GuardFailureSeen(Record):
    """A guard that rejected a call, with the value that failed it (dynscope.probes.guard_failures)."""

    KIND: ClassVar[str] = "dynscope:guard_failure"
    function: str | None = None
    file: str | None = None
    line: int | None = None
    failed_compile_id: str | None = None
    reason: str = ""  # torch's text, as in its recompile_reasons artifact
    guard: str | None = None  # the failing guard's expression
    actual: str | None = None  # repr() of the value it saw


@dataclasses.dataclass(frozen=True)
class FxGraphStructure(Record):
    """An FX graph as a structure (JSON payload: dynscope.model.fxgraph), for the stage event ``event_id``."""

    KIND: ClassVar[str] = "dynscope:fx_graph"
    event_id: int | None = None
    stage_event: str | None = None


# `dynscope explain` options that take a value: the explain command parses its command line with this
# set, and the model reads a recorded command with it (here, in the contract, so that the command needs
# no import of the model: most of a launch's own start-up time).
EXPLAIN_VALUE_OPTIONS = frozenset({"-o", "--output", "--html"})

LOG_TAP_PREFIX = "dynscope:log:"
# torch's artifact logs dynscope taps (dynscope.probes.log_taps); the payload is the logged text
LOG_TAPS = ("bytecode", "ir_pre_fusion", "ir_post_fusion", "cudagraphs")


def log_tap_kind(artifact: str) -> str:
    return LOG_TAP_PREFIX + artifact


@dataclasses.dataclass(frozen=True)
class MinifyResult(Record):
    """What ``dynscope minify`` found: the one form of its result (the capture event, result.json,
    the summary JSON and every view)."""

    KIND: ClassVar[str] = "dynscope:minify_result"
    compile_id: str | None = None
    kind: str | None = None  # compile_error | runtime_error | accuracy | crash | hang
    signature: str | None = None  # how it fails, in words
    culprit_stage: str | None = None  # dynamo | aot_autograd | inductor | backend | user
    culprit_backend: str | None = None  # the first backend of eager -> aot_eager -> ... -> inductor that fails
    culprit: str | None = None  # the culprit in words, subsystem and op included
    passed_backends: tuple[str, ...] = ()
    subsystem: str | None = None  # e.g. "lowerings", "post_grad_passes", "decomposition"
    op: str | None = None  # e.g. "aten.relu.default"
    repro: str | None = None  # path of repro.py
    verified: bool = False  # the repro failed the same way in a fresh process
    verify: str | None = None  # what the fresh process did, in words
    checks_run: int = 0
    checks_total: int | None = None
    nodes_before: int | None = None
    nodes_after: int | None = None
    wall_s: float | None = None
    backend: str | None = None  # the backend the program used
    attribution: str | None = None
    reproduced: bool = True  # the graph failed outside the program (False: only the traceback names the layer)
    notes: tuple[str, ...] = ()

    @property
    def headline(self) -> str:
        """One line: what failed, where, and whether there is a proven repro."""
        where = f"compile {self.compile_id}" if self.compile_id else "a graph"
        found = f"culprit: {self.culprit}" if self.culprit else "culprit not found"
        repro = f"verified repro: {self.repro}" if self.verified and self.repro else "no verified repro"
        return f"{where} · {self.signature or self.kind or 'failure'} · {found} · {repro}"

    def to_json(self) -> dict[str, Any]:
        return self.to_metadata()


@dataclasses.dataclass(frozen=True)
class ImportStart(Record):
    KIND: ClassVar[str] = "dynscope:import_start"
    files: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ImportEnd(Record):
    """What ``dynscope import`` read, and what it could not (also the capture's ``imported`` meta)."""

    KIND: ClassVar[str] = "dynscope:import_end"
    format: str = "TORCH_TRACE"
    files: tuple[str, ...] = ()
    lines: int = 0
    events: int = 0
    bad_lines: int = 0
    bad_examples: tuple[str, ...] = ()  # "file:line: why"
    payload_mismatches: int = 0  # payload shorter/different than torch's md5 says (a truncated log)
    unknown_events: dict[str, int] = dataclasses.field(default_factory=dict)
    oversized_events: int = 0  # events longer than dynscope.trace_import.MAX_EVENT_BYTES: skipped
    skipped_files: tuple[str, ...] = ()  # "path: why": FIFOs, devices... in a log directory, not read


@dataclasses.dataclass(frozen=True)
class RuntimeSnapshot(Record):
    """``explain --profile``: a cumulative runtime snapshot (JSON payload: dynscope.model.runtime)."""

    KIND: ClassVar[str] = "dynscope:runtime"
    final: bool = False  # the run's last snapshot (False: a periodic one)


@dataclasses.dataclass(frozen=True)
class EagerTwinRun(Record):
    """``explain --vs-eager``: the eager twin run (JSON payload: its runtime snapshot)."""

    KIND: ClassVar[str] = "dynscope:runtime_eager"
    exit_code: int = -1
    elapsed_s: float = 0.0
    output_tail: str = ""


@dataclasses.dataclass(frozen=True)
class CacheArtifactsCall(Record):
    """The program called ``torch.compiler.save_cache_artifacts`` or ``load_cache_artifacts``
    (torch logs neither): what the portable cache blob held, per artifact type (torch's
    ``CacheInfo``: "inductor", "aot_autograd", "autotune", "pgo", ...), and its size."""

    KIND: ClassVar[str] = "dynscope:cache_artifacts"
    op: str = ""  # "save" | "load"
    size_bytes: int | None = None  # the blob saved or loaded (None: torch returned nothing)
    artifacts: dict[str, int] = dataclasses.field(default_factory=dict)  # artifact type -> how many


@dataclasses.dataclass(frozen=True)
class WarmStart(Record):
    """``explain --warm``: this capture is the warm run; ``cold_capture`` (a file name beside it)
    recorded the cold run, in the same fresh cache directory, just before."""

    KIND: ClassVar[str] = "dynscope:warm_start"
    cold_capture: str = ""
    cold_exit_code: int | None = None
    cold_elapsed_s: float | None = None
    warm_elapsed_s: float | None = None


@dataclasses.dataclass(frozen=True)
class AutotuneSeen(Record):
    """``mode="max-autotune"``: one autotuned op (JSON payload: ``{"op", "choices": [{"name",
    "description", "ms"}], "picked"}``, choices fastest first)."""

    KIND: ClassVar[str] = "dynscope:autotune"
    op: str = ""
    choices_total: int = 0


@dataclasses.dataclass(frozen=True)
class NumericsNode:
    """One intermediate of a compiled graph, compared in ``dynscope numerics``: its value in the
    compiled run and in eager at the program's precision, each against a higher-precision reference."""

    graph: str  # the compile id of the graph ("0/0"); a backward graph has its forward's id
    direction: str  # "forward" or "backward"
    index: int  # position in the graph's node order (the x axis of the error plot)
    node: str  # FX node name in the post-grad graph ("relu", "add_3")
    op: str  # its target ("aten.relu.default")
    eager_error: float  # eager at the program's precision vs the reference (the criterion's metric)
    compiled_error: float  # the compiled run's value vs the reference, same metric
    kernel: str = ""  # the generated kernel that computes it ("cpp_fused_relu_0"); "" for extern/none
    source: str = ""  # the user's line, "path:line"
    stack: tuple[BreakFrame, ...] = ()  # the user's stack of that line, outermost first
    nondeterministic: bool = False  # two compiled runs of the same inputs disagree here
    suspect: bool = False  # compiled_error exceeds the criterion (and the node is deterministic)


@dataclasses.dataclass(frozen=True)
class NumericsChecked(Record):
    """``dynscope numerics``: every intermediate of the compiled graphs compared at their first call
    (JSON payload: none; the nodes are the data). ``first_suspect`` indexes ``nodes``."""

    KIND: ClassVar[str] = "dynscope:numerics"
    verdict: str = "within"  # "suspect", "within" (compiled within eager's own error) or "nondeterministic"
    criterion: str = ""  # the criterion in words, as the output states it
    factor: float = 0.0  # compiled error may exceed eager's error by this factor ...
    tolerance: float = 0.0  # ... plus this absolute slack
    reference_dtype: str = ""  # "float64", or "float32" for bf16/fp16 programs
    program_dtype: str = ""
    graphs_checked: int = 0
    first_suspect: int | None = None
    nodes: tuple[NumericsNode, ...] = ()
    elapsed_s: float = 0.0
    not_compared: int = 0  # exposed intermediates computed from random numbers (dropout): no eager counterpart
    notes: tuple[str, ...] = ()  # what could not be checked, and why (a graph whose eager rerun failed)


@dataclasses.dataclass(frozen=True)
class CaptureMeta(Record):
    """The capture's ``meta`` table (not an event): what the recorder, ``dynscope import`` and the
    launcher say about the run as a whole."""

    KIND: ClassVar[str] = "meta"
    dynscope_version: str | None = None
    torch_version: str | None = None
    python: str | None = None
    platform: str | None = None
    hostname: str | None = None
    pid: int | None = None
    cwd: str | None = None
    command: tuple[str, ...] = ()
    started: float | None = None
    finished: float | None = None
    rank: int | None = None
    world_size: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    keep_caches: bool = False
    device: dict[str, Any] = dataclasses.field(default_factory=dict)
    probes: dict[str, bool] = dataclasses.field(default_factory=dict)
    probe_details: dict[str, str] = dataclasses.field(default_factory=dict)
    probe_errors: int = 0
    imported: dict[str, Any] | None = None  # ImportEnd's fields, for a capture of TORCH_TRACE logs
    profiled: bool | None = None
    forced_eager: bool | None = None
    # Written by the capture's writer (dynscope.store.writer): false from creation until a clean
    # close; a failed write adds why. Absent in captures older than the mark.
    complete: bool | None = None
    incomplete_reason: str | None = None
    # A child process's capture (run.pid1234.dynscope): the process that started it, and the
    # program's process and start time, which the launcher matches to list it in the program's capture.
    parent_pid: int | None = None
    root_pid: int | None = None
    root_started: float | None = None
    child_captures: tuple[ChildCapture, ...] = ()  # the program's capture: its children's captures


@dataclasses.dataclass(frozen=True)
class ChildCapture:
    """A child process of the program (os.fork, a multiprocessing worker) that recorded a capture of
    its own in the program's capture's directory. ``file`` is only ever shown, never opened from here."""

    file: str
    pid: int
    compiles: int = 0



# -- dynscope fix (dynscope/fix/apply.py in a trial run; the verified result in the program's capture) --

@dataclasses.dataclass(frozen=True)
class FixFeatures(Record):
    """What this torch offers the remedies (payload: a JSON object, probes.compat.remedy_features)."""

    KIND: ClassVar[str] = "dynscope:fix_features"


@dataclasses.dataclass(frozen=True)
class FixApplied(Record):
    """A remedy of the trial took effect (the ``index``-th of its actions)."""

    KIND: ClassVar[str] = "dynscope:fix_applied"
    index: int = 0
    op: str | None = None
    ok: bool = False
    how: str | None = None


@dataclasses.dataclass(frozen=True)
class FixRegion(Record):
    """A callable the program gave torch.compile (a module: its forward)."""

    KIND: ClassVar[str] = "dynscope:fix_region"
    function: str = "?"
    file: str | None = None
    line: int | None = None  # the code's first line (co_firstlineno: its def, or its first decorator)


@dataclasses.dataclass(frozen=True)
class FixOutput(Record):
    """One call's outputs of a compiled callable (payload: a JSON list, dynscope.fix.apply.describe_outputs)."""

    KIND: ClassVar[str] = "dynscope:fix_output"
    region: str = "?"
    call: int = 0


# -- dynscope fix: the kinds of problem, and the actions a trial child applies -------------------

# The one vocabulary of problem kinds: the summary's problems (analysis/problems.py), fix's remedy
# table (analysis/remedies.py) and the fixes recorded into a capture (FixResult.matches) all name
# a problem by one of these.
ProblemKind = typing.Literal["error", "recompile_limit", "skipped_frame", "graph_break", "recompile"]
PROBLEM_KINDS: tuple[ProblemKind, ...] = typing.get_args(ProblemKind)
# What the remedy table serves: the summary's problems, and the first suspect of a `dynscope numerics` check
# (analysis/remedies.numerics_problem), which is not one of the summary's ranked problems; only an engine that
# judges the error (before -> after) rather than equal outputs can try its remedies.
RemedyKind = typing.Literal[ProblemKind, "numerics"]
REMEDY_KINDS: tuple[RemedyKind, ...] = typing.get_args(RemedyKind)
# The fix document (docs/fix-json.md) groups them coarser: its `kind` field is one of these
# ("any" is a --try row, judged on every problem together).
FixFamily = typing.Literal["break", "recompile", "error", "numerics"]
FIX_FAMILY: dict[RemedyKind, FixFamily] = {
    "graph_break": "break", "skipped_frame": "break", "recompile": "recompile", "recompile_limit": "recompile",
    "error": "error", "numerics": "numerics",
}



def is_problem_kind(text: str) -> typing.TypeGuard[ProblemKind]:
    return text in PROBLEM_KINDS


# What a config value or a compile argument can be: it travels to the trial child as JSON.
JsonValue: typing.TypeAlias = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


def _json_value(value: object, where: str) -> JsonValue:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v, where) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {str(k): _json_value(v, where) for k, v in value.items()}
    raise ValueError(f"{where}: {type(value).__name__} is not a JSON value")


def _field(data: Mapping[str, object], name: str, kind: type[T], where: str) -> T:
    value = data.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}: {name} must be {kind.__name__}, not {type(value).__name__}")
    return value


def _optional(data: Mapping[str, object], name: str, kind: type[T], where: str) -> T | None:
    return None if data.get(name) is None else _field(data, name, kind, where)


# Each action is what one remedy changes in a trial run, applied by dynscope/fix/apply.py, which
# dispatches on its type; ``OP`` names it on the wire (and in "... did not apply" notes). A new
# kind of remedy (a source rewrite, say) is one more class here and in ``Action``, and one more
# case in apply.py's ``Trial._apply`` (mypy's assert_never there says where it is missing).


@dataclasses.dataclass(frozen=True)
class SetConfig:
    """``module.name = value`` before the program compiles (a config of torch or of the program)."""

    OP: ClassVar[str] = "config"
    module: str
    name: str
    value: JsonValue

    @property
    def target(self) -> str:
        return f"{self.module}.{self.name}"

    def to_json(self) -> dict[str, JsonValue]:
        return {"op": self.OP, "target": self.target, "value": self.value}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SetConfig:
        module, _, name = _field(data, "target", str, cls.OP).rpartition(".")
        if not module or not name:
            raise ValueError(f"{cls.OP}: target must be a dotted name")
        return cls(module, name, _json_value(data.get("value"), cls.OP))


@dataclasses.dataclass(frozen=True)
class AddLoggingFunction:
    """``torch._dynamo.config.reorderable_logging_functions.add(function)``: a builtin (``print``)
    or a dotted name (``logging.info``)."""

    OP: ClassVar[str] = "logging_function"
    function: str

    def to_json(self) -> dict[str, JsonValue]:
        return {"op": self.OP, "function": self.function}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> AddLoggingFunction:
        return cls(_field(data, "function", str, cls.OP))


@dataclasses.dataclass(frozen=True)
class CompileWith:
    """Extra keyword arguments to every ``torch.compile`` of the program (``dynamic=True``)."""

    OP: ClassVar[str] = "compile_kwargs"
    kwargs: tuple[tuple[str, JsonValue], ...]

    def to_json(self) -> dict[str, JsonValue]:
        return {"op": self.OP, "kwargs": dict(self.kwargs)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CompileWith:
        kwargs = _field(data, "kwargs", dict, cls.OP)
        return cls(tuple((str(k), _json_value(v, cls.OP)) for k, v in kwargs.items()))


@dataclasses.dataclass(frozen=True)
class MarkDynamic:
    """``torch._dynamo.mark_dynamic(arg, dim)`` (``maybe``: maybe_mark_dynamic) on an input of
    the compiled ``function`` of ``file``, before each call."""

    OP: ClassVar[str] = "mark_dynamic"
    function: str
    file: str | None
    arg: str
    dim: int
    maybe: bool = False

    def to_json(self) -> dict[str, JsonValue]:
        return {"op": self.OP, "function": self.function, "file": self.file, "arg": self.arg, "dim": self.dim,
                "maybe": self.maybe}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> MarkDynamic:
        return cls(_field(data, "function", str, cls.OP), _optional(data, "file", str, cls.OP),
                   _field(data, "arg", str, cls.OP), _field(data, "dim", int, cls.OP),
                   bool(_optional(data, "maybe", bool, cls.OP)))


@dataclasses.dataclass(frozen=True)
class DisableFunction:
    """The ``function`` of ``file`` (whose code holds ``line``) replaced in its module or class by
    ``torch.compiler.disable(fn)``."""

    OP: ClassVar[str] = "disable"
    file: str
    function: str
    line: int | None = None

    def to_json(self) -> dict[str, JsonValue]:
        return {"op": self.OP, "file": self.file, "function": self.function, "line": self.line}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> DisableFunction:
        return cls(_field(data, "file", str, cls.OP), _field(data, "function", str, cls.OP),
                   _optional(data, "line", int, cls.OP))


@dataclasses.dataclass(frozen=True)
class ShowOnly:
    """A change only the user can make (a ``torch._check`` in their code): shown, never run."""

    OP: ClassVar[str] = "show_only"
    code: str

    def to_json(self) -> dict[str, JsonValue]:
        return {"op": self.OP, "code": self.code}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ShowOnly:
        return cls(_field(data, "code", str, cls.OP))


@dataclasses.dataclass(frozen=True)
class ChangeSource:
    """Files run from changed text in the trial child (a patch given with ``fix --patch``): each
    ``(absolute path, new text)`` is served through the child's shadow (dynscope/runner/shadow.py)
    to the program's imports and script; nothing on disk changes."""

    OP: ClassVar[str] = "source"
    files: tuple[tuple[str, str], ...]

    def to_json(self) -> dict[str, JsonValue]:
        return {"op": self.OP, "files": [[path, text] for path, text in self.files]}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ChangeSource:
        files = data.get("files")
        if not isinstance(files, list) or not all(
                isinstance(f, list) and len(f) == 2 and all(isinstance(x, str) for x in f) for f in files):
            raise ValueError(f"{cls.OP}: files must be a list of [path, text] pairs")
        return cls(tuple((f[0], f[1]) for f in files))


Action: typing.TypeAlias = (SetConfig | AddLoggingFunction | CompileWith | MarkDynamic | DisableFunction | ShowOnly
                            | ChangeSource)
_ACTIONS: dict[str, Callable[[Mapping[str, object]], Action]] = {cls.OP: cls.from_json for cls in typing.get_args(Action)}


def action_from_json(data: object) -> Action:
    """An action as the parent wrote it (``Action.to_json``); ValueError when it is not one."""
    if not isinstance(data, dict):
        raise ValueError(f"an action is a JSON object, not {type(data).__name__}")
    parse = _ACTIONS.get(str(data.get("op")))
    if parse is None:
        raise ValueError(f"unknown action {data.get('op')!r}")
    return parse(data)


# One compiled call's outputs as the trial child records them (payload of FixOutput: a JSON list
# of leaves) and the parent compares them (analysis/fix_verdict.py).
Number: typing.TypeAlias = bool | int | float | None  # None: NaN, or a value not recorded


@dataclasses.dataclass(frozen=True)
class OutputLeaf:
    kind: str  # "tensor", "number", "str", "NoneType", "unrecorded" or the leaf's type name
    value: JsonValue = None  # a number or string leaf's value; "unrecorded": why
    dtype: str | None = None  # tensors: dtype without "torch.", shape, a hash of every value,
    shape: tuple[int, ...] | None = None  # and the values (all up to a cap, else an even sample)
    hash: str | None = None
    values: tuple[Number, ...] = ()
    complete: bool = True
    unreadable: str | None = None  # a tensor that could not be read back: why

    def to_json(self) -> dict[str, JsonValue]:
        if self.kind != "tensor":
            return {"kind": self.kind, "value": self.value}
        out: dict[str, JsonValue] = {"kind": self.kind, "dtype": self.dtype,
                                     "shape": None if self.shape is None else list(self.shape)}
        if self.unreadable is not None:
            return {**out, "values": [], "unreadable": self.unreadable}
        return {**out, "hash": self.hash, "values": list(self.values), "complete": self.complete}

    @classmethod
    def from_json(cls, data: object) -> OutputLeaf:
        if not isinstance(data, dict):
            return cls("unrecorded", "not a JSON object")
        kind = str(data.get("kind"))
        if kind != "tensor":
            return cls(kind, _json_value(data.get("value"), "output"))
        shape = data.get("shape")
        values = data.get("values")
        return cls(kind, None, _optional(data, "dtype", str, "output"),
                   tuple(int(n) for n in shape) if isinstance(shape, list) else None,
                   _optional(data, "hash", str, "output"),
                   tuple(v if v is None or isinstance(v, (bool, int, float)) else None for v in values)
                   if isinstance(values, list) else (),
                   data.get("complete", True) is not False, _optional(data, "unreadable", str, "output"))


@dataclasses.dataclass(frozen=True)
class CallOutputs:
    """One call of one compiled region (``region``: "<n>:<qualname>", ``call`` from 1)."""

    region: str
    call: int
    leaves: tuple[OutputLeaf, ...]

    def to_json(self) -> dict[str, JsonValue]:
        return {"region": self.region, "call": self.call, "leaves": [leaf.to_json() for leaf in self.leaves]}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CallOutputs:
        leaves = data.get("leaves")
        return cls(str(data.get("region")), _field(data, "call", int, "output"),
                   tuple(OutputLeaf.from_json(x) for x in leaves) if isinstance(leaves, list) else ())


@dataclasses.dataclass(frozen=True)
class FixProblemRef:
    kind: str = "?"  # a FixFamily: break | recompile | error (read from a capture, so any text)
    file: str | None = None
    line: int | None = None
    function: str | None = None
    detail: str = ""
    count: int = 1


@dataclasses.dataclass(frozen=True)
class FixResult(Record):
    """A remedy ``dynscope fix`` proved on one problem of this run (a trial row, docs/fix-json.md)."""

    KIND: ClassVar[str] = "dynscope:fix_result"
    problem: FixProblemRef = FixProblemRef()
    remedy: str = ""  # the change in one line
    remedy_key: str | None = None
    applies_as: str = ""  # config | wrap | code
    patch: str = ""
    verdict: str = ""  # fixed | improved
    before: dict[str, Any] = dataclasses.field(default_factory=dict)
    after: dict[str, Any] = dataclasses.field(default_factory=dict)
    max_abs_diff: float | None = None

    @property
    def kind(self) -> str:
        return self.problem.kind

    @property
    def file(self) -> str | None:
        return self.problem.file

    @property
    def line(self) -> int | None:
        return self.problem.line

    @property
    def function(self) -> str | None:
        return self.problem.function

    @property
    def detail(self) -> str:
        return self.problem.detail

    def matches(self, kind: ProblemKind | str, file: str | None, line: int | None, function: str | None = None) -> bool:
        """Whether this fix is for a problem of the summary's kinds (graph_break, recompile, error...)."""
        ours = FIX_FAMILY[kind] if is_problem_kind(kind) else kind
        if ours != self.kind or file != self.file:
            return False
        if self.kind == "recompile":
            return function == self.function
        return line == self.line

    def to_json(self) -> dict[str, Any]:
        return self.to_metadata()

DYNSCOPE_RECORDS: tuple[type[Record], ...] = (
    RunStart, RunEnd, ProbesRemoved, ProgramRaised, ProbeError, GraphBreakSeen, GuardFailureSeen, FxGraphStructure,
    MinifyResult, ImportStart, ImportEnd, RuntimeSnapshot, EagerTwinRun, AutotuneSeen, CacheArtifactsCall, WarmStart,
    FixFeatures, FixApplied, FixRegion, FixOutput, FixResult, NumericsChecked,
)


# -- torch's structured trace --------------------------------------------------------------------

# Event kinds torch's structured trace writes (``trace_structured`` calls in torch 2.x), besides
# artifacts (any ``artifact:<name>``).
TORCH_EVENTS = frozenset({
    "str", "dynamo_start", "dump_file", "describe_storage", "describe_tensor", "describe_source",
    "dynamo_output_graph", "link", "optimize_ddp_split_graph", "optimize_ddp_split_child",
    "compiled_autograd_graph", "dynamo_guards", "dynamo_cpp_guards_str", "guard_added_fast", "guard_added",
    "symbolic_shape_specialization", "create_symbol", "create_unbacked_symbol", "propagate_real_tensors",
    "propagate_real_tensors_provenance", "expression_created", "unbacked_symbol_created",
    "aot_joint_graph", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph",
    "inductor_output_code", "chromium_event", "compilation_metrics", "bwd_compilation_metrics",
    "compilation_metrics_runtime", "bwd_compilation_metrics_runtime", "torch_version", "graph_dump",
    "missing_fake_kernel", "mismatched_fake_kernel", "inductor_pre_grad_graph", "inductor_post_grad_graph",
    "dynamo_error", "exported_program", "dynamo_side_effects", "compiler_collective",
})
ARTIFACT_PREFIX = "artifact:"


@dataclasses.dataclass(frozen=True)
class TraceFrame:
    """A frame of torch's stacks: ``filename`` is an index into the ``str`` events' table."""

    line: int | None = None
    name: str | None = None
    filename: int | str | None = None
    loc: str | None = None


@dataclasses.dataclass(frozen=True)
class InternedString(Record):
    """torch's interned file names: metadata ``{"str": [path, index]}``."""

    KIND: ClassVar[str] = "str"
    path: str = ""
    index: int = 0

    @classmethod
    def parse(cls, metadata: Any) -> InternedString:
        entry = metadata.get("str") if isinstance(metadata, Mapping) else None
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and _is_int(entry[1])):
            raise NotUnderstood(cls.KIND, "expected [path, index]")
        return cls(entry[0], entry[1])


@dataclasses.dataclass(frozen=True)
class DynamoStart(Record):
    KIND: ClassVar[str] = "dynamo_start"
    NESTED: ClassVar[str | None] = "dynamo_start"
    stack: tuple[TraceFrame, ...] = ()


@dataclasses.dataclass(frozen=True)
class CompilationMetrics(Record):
    """The fields of torch's per-compile metrics that dynscope reads."""

    KIND: ClassVar[str] = "compilation_metrics"
    NESTED: ClassVar[str | None] = "compilation_metrics"
    compile_id: str | None = None
    co_name: str | None = None
    co_filename: str | None = None
    co_firstlineno: int | None = None
    fail_type: str | None = None
    fail_reason: str | None = None
    fail_user_frame_filename: str | None = None
    fail_user_frame_lineno: int | None = None
    has_guarded_code: bool | None = None
    start_time: float | None = None
    entire_frame_compile_time_s: float | None = None
    backend_compile_time_s: float | None = None
    inductor_compile_time_s: float | None = None
    code_gen_time_s: float | None = None
    graph_op_count: int | None = None
    graph_node_count: int | None = None
    guard_count: int | None = None
    restart_reasons: tuple[str, ...] | None = None
    guard_latency_us: float | None = None
    cudagraph_skip_reason: str | None = None


@dataclasses.dataclass(frozen=True)
class BackwardMetrics(Record):
    KIND: ClassVar[str] = "bwd_compilation_metrics"
    NESTED: ClassVar[str | None] = "bwd_compilation_metrics"
    compile_id: str | None = None
    backward_cumulative_compile_time_us: float | None = None
    duration_us: float | None = None


@dataclasses.dataclass(frozen=True)
class SymbolCreated(Record):
    KIND: ClassVar[str] = "create_symbol"
    NESTED: ClassVar[str | None] = "create_symbol"
    source: str | None = None  # e.g. "L['x'].size()[0]"


@dataclasses.dataclass(frozen=True)
class DynamoOutputGraph(Record):
    """The Dynamo graph (printed, in the payload), with the sizes of its inputs."""

    KIND: ClassVar[str] = "dynamo_output_graph"
    NESTED: ClassVar[str | None] = "dynamo_output_graph"
    sizes: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class CacheLookup(Record):
    """One cache lookup torch logged as an artifact (``CACHE_ARTIFACTS``): its JSON payload.
    ``components`` are torch's cache-key details, one line each: ``[hash] name: value``."""

    KIND: ClassVar[str] = "artifact:cache_lookup"  # stands for every name in CACHE_ARTIFACTS
    cache_state: str | None = None  # "hit" | "miss" | "bypass" (the artifact's name says it too)
    key: str | None = None
    components: tuple[str, ...] = ()
    cache_bypass_reason: str | None = None
    time_saved_ns: int | None = None  # fx graph cache hit: the compile time it saved
    time_saved_ms: float | None = None  # AOTAutograd cache hit: the compile time it saved
    time_taken_ns: int | None = None  # fx graph cache miss: what compiling took

    @classmethod
    def parse_payload(cls, name: str, payload: str | None) -> CacheLookup:
        try:
            value = json.loads(payload or "")
        except (ValueError, RecursionError):
            raise NotUnderstood(name, "its payload is not JSON") from None
        if not isinstance(value, Mapping):
            raise NotUnderstood(name, "its payload is not a JSON object")
        return _build(cls, value, name)


# torch's cache artifacts, by layer: (artifact name, layer, state). A bundled fx graph hit is an
# Inductor graph an AOTAutograd cache entry carried with it.
CACHE_ARTIFACTS: tuple[tuple[str, str, str], ...] = (
    *((f"aotautograd_cache_{s}", "aotautograd", s) for s in ("hit", "miss", "bypass")),
    *((f"fx_graph_cache_{s}", "fx_graph", s) for s in ("hit", "miss", "bypass")),
    ("fx_graph_bundled_cache_hit", "fx_graph", "hit"),
    ("dynamo_cache_bypass", "dynamo", "bypass"),
    ("precompile_cache_bypass", "dynamo", "bypass"),
)


TORCH_RECORDS: tuple[type[Record], ...] = (
    InternedString, DynamoStart, CompilationMetrics, BackwardMetrics, SymbolCreated, DynamoOutputGraph,
)


def is_torch_event(kind: str) -> bool:
    return kind in TORCH_EVENTS or kind.startswith(ARTIFACT_PREFIX)


def is_known(kind: str) -> bool:
    """Whether this contract names the event kind (torch's or dynscope's)."""
    return (kind in TORCH_EVENTS or kind in _DYNSCOPE_KINDS or kind.startswith(ARTIFACT_PREFIX)
            or (kind.startswith(LOG_TAP_PREFIX) and kind.removeprefix(LOG_TAP_PREFIX) in LOG_TAPS))


_DYNSCOPE_KINDS = frozenset(r.KIND for r in DYNSCOPE_RECORDS)


def chrome_event(payload: str | None) -> dict[str, Any]:
    """A ``chromium_event`` payload: one Chrome trace event (an object)."""
    try:
        value = json.loads(payload or "")
    except ValueError:
        raise NotUnderstood("chromium_event", "its payload is not JSON") from None
    if not isinstance(value, dict):
        raise NotUnderstood("chromium_event", "its payload is not a JSON object")
    return value


def recompile_reasons(payload: str | None) -> list[str]:
    """The ``recompile_reasons`` artifact: one reason as text, or a JSON list of them."""
    text = (payload or "").strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except ValueError:
            return [text]
        if not isinstance(value, list):
            raise NotUnderstood("artifact:recompile_reasons", "its payload is not a list of reasons")
        return [str(v) for v in value if str(v).strip()]
    return [text] if text else []


# -- checking a shape ----------------------------------------------------------------------------
# Each declared type is turned once into a checking function (a capture of a thousand compiles
# checks tens of thousands of fields: no type introspection per value).

Check = Callable[[Any, str, str], Any]  # (value, kind, where) -> the value as the record holds it
_CHECKS: dict[Any, Check] = {}


def _build(cls: type[R], data: Mapping[str, Any], kind: str, at: str = "") -> R:
    built: R = _fields_check(cls)(data, kind, at)  # the check builds cls itself
    return built


def _fields_check(cls: type) -> Callable[[Mapping[str, Any], str, str], Any]:
    key = ("fields", cls)
    if key not in _CHECKS:
        hints = typing.get_type_hints(cls)
        plan = [(f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                 _check(hints[f.name])) for f in dataclasses.fields(cls)]

        def build(data: Mapping[str, Any], kind: str, at: str) -> Any:
            values = {}
            for name, required, check in plan:
                if name in data:
                    values[name] = check(data[name], kind, at + name)
                elif required:
                    raise NotUnderstood(kind, f"{at}{name} is missing")
            return cls(**values)

        _CHECKS[key] = build
    return _CHECKS[key]


def _check(hint: Any) -> Check:
    if hint not in _CHECKS:
        _CHECKS[hint] = _make_check(hint)
    return _CHECKS[hint]


def _make_check(hint: Any) -> Check:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return lambda value, kind, where: value
    if origin is Union or type(hint).__name__ == "UnionType":
        optional = type(None) in args
        options = [_check(a) for a in args if a is not type(None)]

        def union(value: Any, kind: str, where: str) -> Any:
            if value is None and optional:
                return None
            for option in options:
                try:
                    return option(value, kind, where)
                except NotUnderstood:
                    continue
            raise _wrong(kind, where, hint, value)
        return union
    if origin is tuple:
        item = _check(args[0])

        def sequence(value: Any, kind: str, where: str) -> Any:
            if not isinstance(value, list | tuple):
                raise _wrong(kind, where, hint, value)
            return tuple(item(v, kind, f"{where}[{i}]") for i, v in enumerate(value))
        return sequence
    if origin is dict:
        item = _check(args[1])

        def mapping(value: Any, kind: str, where: str) -> Any:
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise _wrong(kind, where, hint, value)
            return {k: item(v, kind, f"{where}.{k}") for k, v in value.items()}
        return mapping
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        fields = _fields_check(hint)

        def record(value: Any, kind: str, where: str) -> Any:
            if not isinstance(value, Mapping):
                raise _wrong(kind, where, hint, value)
            return fields(value, kind, f"{where}.")
        return record
    scalars: dict[type, Callable[[Any], bool]] = {
        bool: lambda v: isinstance(v, bool), int: _is_int, str: lambda v: isinstance(v, str),
        float: lambda v: isinstance(v, int | float) and not isinstance(v, bool)}
    accepts = scalars.get(hint)
    if accepts is None:
        raise TypeError(f"events.py declares a type it cannot check: {hint!r}")  # a bug here, not in the capture

    def scalar(value: Any, kind: str, where: str) -> Any:
        if accepts(value):
            return value
        raise _wrong(kind, where, hint, value)
    return scalar


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _wrong(kind: str, where: str, hint: Any, value: Any) -> NotUnderstood:
    expected = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
    return NotUnderstood(kind, f"{where}: expected {expected}, got {type(value).__name__}")


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
