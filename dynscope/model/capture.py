"""The model of one capture: typed records, read lazily from the file.

``Capture.open(path)`` validates the file and reads only its meta table. Each accessor runs
narrow indexed queries the first time it is called and caches the result, so opening a
capture of a thousand compiles costs only what the first view actually shows.
"""

from __future__ import annotations

import dataclasses
import os
import re
import runpy
import threading
from collections import OrderedDict
from functools import cached_property
from typing import Any

from dynscope import events as contract
from dynscope.errors import DynscopeError
from dynscope.events import NotUnderstood, Record
from dynscope.model import stages as pipeline
from dynscope.model.break_text import (
    break_consequence,
    first_line,
    gb_id_from_link,
    parse_break_artifact,
    parse_break_message,
)
from dynscope.model.collectives import Collective, parse_collectives
from dynscope.model.compile_modes import AutotuneResult, CudagraphSkip, read_autotuning, read_cudagraph_skips
from dynscope.model.fxgraph import FxGraph
from dynscope.model.guards import parse_guard_tree
from dynscope.model.output_code import graph_role, kernel_names, parse_stack_text, split_kernels
from dynscope.model.records import (
    Compile,
    CompileError,
    CompileTimes,
    Frame,
    GraphBreak,
    Guard,
    GuardFailure,
    Kernel,
    ProgramException,
    Recompile,
    RecompileLimitHit,
    Run,
    SkippedFrame,
    StackFrame,
    Stage,
)
from dynscope.model.runtime import RuntimeProfile, read_profile
from dynscope.store.reader import CaptureReader, Event

MinifyResult = contract.MinifyResult  # the record as `dynscope minify` writes it
FixResult = contract.FixResult  # the record as `dynscope fix` writes it

# Why a capture whose writer never closed it is incomplete (it recorded no other reason).
NEVER_CLOSED = ("the recording has not ended: the process writing it is still running, or was killed "
                "before it could close the capture")
RESUME_PREFIX = "torch_dynamo_resume_in_"
_DYNSCOPE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_EXPECTED_ACTUAL = re.compile(r"expected (?P<expected>.+?), actual (?P<actual>.+?)\.?$")
_CACHE_LIMIT = 64  # compiles whose stages and kernels stay parsed in memory
_MAIN_VARIANTS = ("graph", "after", "code", "original")
# What is read of a payload when only its first lines are needed (a graph's role, a bytecode
# dump's kind): a payload's gigabyte costs nothing there.
_HEAD_BYTES = 16 * 1024

class Capture:
    def __init__(self, reader: CaptureReader) -> None:
        self.reader = reader
        self.path = reader.path
        self._lock = threading.RLock()
        self._per_compile: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._not_understood: dict[str, dict[int, str]] = {}  # kind -> {event id: why}

    # -- reading events through the contract (dynscope.events) -----------------------------

    def _parse(self, record: type[Record], event: Event) -> Any:
        """The event's record, or None when its data is not the declared shape (counted)."""
        try:
            return record.parse(event.metadata)
        except NotUnderstood as e:
            self._not_parsed(e, event.id)
            return None

    def _from_fields(self, record: type[Record], row: dict[str, Any]) -> Any:
        try:
            return record.from_fields({name: row["field:" + name] for name in record.json_paths()})
        except NotUnderstood as e:
            self._not_parsed(e, row["id"])
            return None

    def _not_parsed(self, error: NotUnderstood, event_id: int) -> None:
        with self._lock:
            self._not_understood.setdefault(error.kind, {}).setdefault(event_id, error.why)

    def not_understood(self) -> dict[str, tuple[int, str]]:
        """Events the model could not read, per kind: (how many, why the first was not understood).
        Kinds the contract does not name count too. Reads every whole-run record first; what is
        read per compile (FX structures, with its stages) or by one view (torch's chromium events,
        by the timeline) counts once it has been read."""
        self.run, self.exception, self._compiles, self._graph_breaks, self._recompiles  # noqa: B018
        self.probe_errors(), self.minify_results(), self.graph_input_sizes(), self.dynamic_sources()
        found = {kind: (len(ids), next(iter(ids.values()))) for kind, ids in sorted(self._not_understood.items())}
        for kind, count in self.reader.name_counts().items():
            if not contract.is_known(kind):
                found[kind] = (count, "an event kind dynscope does not know")
        return found

    @classmethod
    def open(cls, path: str) -> Capture:
        return cls(CaptureReader(path))

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the run ---------------------------------------------------------------------------

    @cached_property
    def run(self) -> Run:
        # Field by field: a run whose pid is text still has its command and times.
        m, bad = contract.CaptureMeta.parse_each(self.reader.meta)
        if bad:  # counted like events: one entry per field
            with self._lock:
                self._not_understood["meta"] = {-1 - i: why for i, why in enumerate(bad.values())}
        return Run(
            path=self.path,
            dynscope_version=m.dynscope_version,
            torch_version=m.torch_version,
            python=m.python,
            command=list(m.command),
            cwd=m.cwd,
            hostname=m.hostname,
            pid=m.pid,
            rank=m.rank,
            world_size=m.world_size,
            started=m.started,
            finished=m.finished,
            exit_code=m.exit_code,
            signal=m.signal,
            keep_caches=m.keep_caches,
            device=m.device,
            probes=m.probes,
            probe_details=m.probe_details,
            probe_errors=m.probe_errors,
            imported=m.imported,
            incomplete=(m.incomplete_reason or NEVER_CLOSED) if m.complete is False else None,
            child_captures=m.child_captures,
            parent_pid=m.parent_pid,
        )

    @cached_property
    def exception(self) -> ProgramException | None:
        events = self.reader.events([contract.ProgramRaised.KIND])
        if not events:
            return None
        raised = self._parse(contract.ProgramRaised, events[-1])
        if raised is None:
            return None
        return ProgramException(raised.type, raised.module, raised.message,
                                self.reader.payload(events[-1].payload_hash) or "")

    def probe_errors(self) -> list[str]:
        errors = (self._parse(contract.ProbeError, e) for e in self.reader.events([contract.ProbeError.KIND]))
        return [e.message for e in errors if e is not None]

    # -- compiles and frames -----------------------------------------------------------------

    @cached_property
    def _interned_files(self) -> dict[int, str]:
        table: dict[int, str] = {}
        for event in self.reader.events([contract.InternedString.KIND]):
            entry = self._parse(contract.InternedString, event)
            if entry is not None:
                table[entry.index] = entry.path
        return table

    @cached_property
    def _compiles(self) -> dict[str, Compile]:
        starts: dict[str, list[tuple[dict[str, Any], contract.DynamoStart]]] = {}
        for row, start in self._rows(contract.DynamoStart):
            if row["compile_id"] is not None:
                starts.setdefault(row["compile_id"], []).append((row, start))
        metrics: dict[str, tuple[dict[str, Any], contract.CompilationMetrics]] = {
            m.compile_id or row["compile_id"]: (row, m) for row, m in self._rows(contract.CompilationMetrics)}
        backward = {m.compile_id or row["compile_id"]: m for row, m in self._rows(contract.BackwardMetrics)}
        order = sorted(set(starts) | set(metrics), key=lambda c: (starts.get(c) or [metrics[c]])[0][0]["id"])
        compiles = {cid: self._build_compile(cid, starts.get(cid, []), metrics[cid][1] if cid in metrics else None,
                                             backward.get(cid))
                    for cid in order}
        return _named_by_frame(compiles)

    def _rows(self, record: type[Record]) -> list[tuple[dict[str, Any], Any]]:
        """(row, record) for each event of the kind whose fields have the declared shape; the fields
        are extracted by SQLite (CaptureReader.event_fields), not by parsing whole metadata."""
        # "field:" keeps a field named like a column (compile_id) apart from the column
        rows = self.reader.event_fields([record.KIND], {"field:" + k: p for k, p in record.json_paths().items()})
        return [(row, parsed) for row in rows if (parsed := self._from_fields(record, row)) is not None]

    def _build_compile(self, cid: str, starts: list[tuple[dict[str, Any], contract.DynamoStart]],
                       m: contract.CompilationMetrics | None, bwd: contract.BackwardMetrics | None) -> Compile:
        stack = self._user_stack(starts[0][1].stack) if starts else ()
        restarts = m.restart_reasons if m else None
        frame_id, frame_compile_id = _split_compile_id(cid)
        if m is None:
            status, m = "incomplete", contract.CompilationMetrics()
        elif m.fail_type:
            status = "failed"
        elif m.has_guarded_code is False:
            status = "skipped"
        else:
            status = "ok"
        return Compile(
            compile_id=cid,
            frame_id=frame_id,
            frame_compile_id=frame_compile_id,
            # Each graph break restarts the analysis; torch lists why in restart_reasons.
            attempts=len(restarts) + 1 if restarts is not None
            else max((row["attempt"] or 0) for row, _ in starts) + 1 if starts else 1,
            function=m.co_name or (stack[-1].function if stack else None) or "?",
            file=m.co_filename or (stack[-1].file if stack else None),
            line=m.co_firstlineno or (stack[-1].line if stack else None),
            status=status,
            fail_type=m.fail_type,
            fail_reason=m.fail_reason,
            fail_file=m.fail_user_frame_filename,
            fail_line=m.fail_user_frame_lineno,
            started=m.start_time or (starts[0][0]["ts"] if starts else None),
            times=_compile_times(m, bwd),
            graph_op_count=m.graph_op_count,
            graph_node_count=m.graph_node_count,
            guard_count=m.guard_count,
            restart_reasons=tuple(restarts or ()),
            user_stack=stack,
            guard_latency_s=m.guard_latency_us / 1e6 if m.guard_latency_us is not None else None,
            cudagraph_skip_reason=m.cudagraph_skip_reason,
        )

    def _user_stack(self, raw: tuple[contract.TraceFrame, ...]) -> tuple[StackFrame, ...]:
        files = self._interned_files
        frames = [StackFrame(files.get(f.filename, str(f.filename)), f.line, f.name, f.loc) for f in raw]
        # The stack starts in dynscope's runner (runpy, our child process): not the user's code.
        while frames and _is_runner_frame(frames[0].file):
            frames.pop(0)
        return tuple(frames)

    def compiles(self) -> list[Compile]:
        return list(self._compiles.values())

    def compile(self, compile_id: str) -> Compile:
        try:
            return self._compiles[compile_id]
        except KeyError:
            known = ", ".join(list(self._compiles)[:12]) or "none"
            raise DynscopeError(f"no compile {compile_id} in {self.path} (compiles: {known})") from None

    def frames(self) -> list[Frame]:
        grouped: dict[Any, list[Compile]] = {}
        for c in self._compiles.values():
            grouped.setdefault(c.frame_id if c.frame_id is not None else c.compile_id, []).append(c)
        return [
            Frame(cs[0].frame_id, cs[0].function, cs[0].file, cs[0].line, tuple(c.compile_id for c in cs))
            for cs in grouped.values()
        ]

    def chromium_events(self) -> list[dict[str, Any]]:
        """torch's timed regions (Chrome trace events it logs as ``chromium_event``), in order."""
        out = []
        for event in self.reader.events(["chromium_event"]):
            try:
                out.append(contract.chrome_event(self.reader.payload(event.payload_hash)))
            except NotUnderstood as e:
                self._not_parsed(e, event.id)
        return out

    # -- graph breaks, recompiles, errors ---------------------------------------------------

    @cached_property
    def _graph_breaks(self) -> list[GraphBreak]:
        resume_functions = [c for c in self._compiles.values() if c.function.startswith(RESUME_PREFIX)]
        breaks = []
        for event in self.reader.events([contract.GraphBreakSeen.KIND]):
            seen = self._parse(contract.GraphBreakSeen, event)
            if seen is None:
                continue
            message = seen.message or ""
            text = parse_break_message(message)
            stack = tuple(StackFrame(f.file, f.line, f.function, f.code) for f in seen.user_stack)
            reason = seen.reason or message
            consequence, skipped = break_consequence(reason, text.chained, seen.skip_frame)
            # A chained break ("graph break in loop") is named by its root cause: the first break.
            gb_type = text.headline if text.chained else seen.gb_type
            breaks.append(GraphBreak(
                event_id=event.id,
                compile_id=event.compile_id,
                attempt=event.attempt,
                gb_type=gb_type,
                gb_id=gb_id_from_link(text.doc_link) if text.chained else seen.gb_id,
                doc_link=text.doc_link if text.chained else seen.doc_link or text.doc_link,
                message=message,
                reason=reason,
                headline=gb_type or text.headline,
                explanation=text.explanation,
                hints=text.hints,
                developer_context=text.developer_context,
                user_stack=stack,
                traced_function=seen.traced_function,
                traced_line=seen.traced_line,
                resumed_into=self._resume_target(event, seen.traced_line, resume_functions),
                consequence=consequence,
                frame_skipped=skipped,
            ))
        if not breaks and self.run.probes.get("graph_breaks") is False:
            breaks = self._graph_breaks_from_log(resume_functions)
        return breaks

    def _graph_breaks_from_log(self, resume_functions: list[Compile]) -> list[GraphBreak]:
        """Without dynscope's probe (an imported TORCH_TRACE log): torch's own break artifact."""
        breaks = []
        for event in self.reader.events(["artifact:dynamo_graph_break_reason"]):
            art = parse_break_artifact(self.reader.payload(event.payload_hash) or "")
            text = parse_break_message(art.message)
            # Torch's traceback reaches above the compiled frame; the break itself is its last frame.
            last = art.stack[-1] if art.stack and (art.stack[-1][0], art.stack[-1][1]) == (art.file, art.line) \
                else (art.file, art.line, None, None)
            # The traceback names a resume function after its original; the probe names the frame compiled.
            compiled = self._compiles.get(event.compile_id or "")
            if compiled is not None and last[2] is not None and \
                    re.sub(r"_at_\d+$", "", compiled.function.removeprefix(RESUME_PREFIX)) == last[2]:
                last = (last[0], last[1], compiled.function, last[3])
            consequence, skipped = break_consequence(art.reason, text.chained, False)
            breaks.append(GraphBreak(
                event_id=event.id,
                compile_id=event.compile_id,
                attempt=event.attempt,
                gb_type=art.gb_type,
                gb_id=art.gb_id,
                doc_link=text.doc_link,
                message=art.message,
                reason=art.reason,
                headline=art.gb_type or text.headline,
                explanation=text.explanation,
                hints=text.hints,
                developer_context=text.developer_context,
                user_stack=(StackFrame(*last),),
                traced_function=last[2],
                traced_line=art.line,
                resumed_into=self._resume_target(event, art.line, resume_functions),
                consequence=consequence,
                frame_skipped=skipped,
            ))
        return breaks

    def _resume_target(self, event: Event, traced_line: int | None, resumes: list[Compile]) -> str | None:
        """The resume function Dynamo continued in: torch names it after the frame and line."""
        if event.compile_id is None or event.compile_id not in self._compiles:
            return None
        root = self._compiles[event.compile_id].function.removeprefix(RESUME_PREFIX)
        root = re.sub(r"_at_\d+$", "", root)
        exact = f"{RESUME_PREFIX}{root}_at_{traced_line}"
        candidates = [c.function for c in resumes if c.function.startswith(f"{RESUME_PREFIX}{root}_at_")]
        if exact in candidates:
            return exact
        return candidates[0] if len(set(candidates)) == 1 else None

    def graph_breaks(self) -> list[GraphBreak]:
        return list(self._graph_breaks)

    def autotuning(self) -> list[AutotuneResult]:
        """mode="max-autotune": every autotuned op, its benchmarked choices and the one picked."""
        return read_autotuning(self.reader, self._not_parsed)

    def cudagraph_skips(self) -> list[CudagraphSkip]:
        """mode="reduce-overhead": why CUDA graphs were not used, per compile where torch says."""
        reasons = {c.compile_id: c.cudagraph_skip_reason for c in self.compiles() if c.cudagraph_skip_reason}
        return read_cudagraph_skips(self.reader, reasons, [(c.compile_id, c.function) for c in self.compiles()])

    @cached_property
    def runtime(self) -> RuntimeProfile | None:
        """The run's measured runtime (``explain --profile``), or None when it was not profiled."""
        return read_profile(self.reader)

    @cached_property
    def _recompiles(self) -> list[Recompile]:
        probes = [(e.id, seen) for e in self.reader.events([contract.GuardFailureSeen.KIND])
                  if (seen := self._parse(contract.GuardFailureSeen, e)) is not None]
        out = []
        for event in self.reader.events(["artifact:recompile_reasons"]):
            reasons = contract.recompile_reasons(self.reader.payload(event.payload_hash))
            if not reasons or event.compile_id is None:
                continue
            # The same guard can fail on many calls: the probe that explains this recompile
            # is the latest one with the same text before it.
            latest = {seen.reason: seen for id_, seen in probes if id_ < event.id}
            failures = tuple(_guard_failure(text, latest.get(text)) for text in reasons)
            compile_ = self._compiles.get(event.compile_id)
            out.append(Recompile(
                compile_id=event.compile_id,
                function=compile_.function if compile_ else "?",
                file=compile_.file if compile_ else None,
                line=compile_.line if compile_ else None,
                reason=failures[0].reason,
                failures=failures,
            ))
        return out

    def dynamic_sources(self) -> dict[str, tuple[str, ...]]:
        """Per compile, the values Dynamo made symbolic (torch's create_symbol events), e.g.
        "L['x'].size()[0]": how a recompile after a shape change made that dimension dynamic."""
        found: dict[str, list[str]] = {}
        for row, symbol in self._rows(contract.SymbolCreated):
            if row["compile_id"] is not None and symbol.source is not None:
                found.setdefault(row["compile_id"], []).append(symbol.source)
        return {cid: tuple(dict.fromkeys(sources)) for cid, sources in found.items()}

    def recompiles(self) -> list[Recompile]:
        return list(self._recompiles)

    def collectives(self) -> list[Collective]:
        """Collectives each Dynamo graph issues, in compile order (from the printed FX graphs)."""
        found: list[Collective] = []
        for event in self.reader.events(["dynamo_output_graph"]):
            text = self.reader.payload(event.payload_hash) or ""
            if "c10d_functional" in text:
                found += parse_collectives(text, event.compile_id)
        return found

    def graph_input_sizes(self) -> dict[str, dict[str, Any]]:
        """Per compile, the sizes of its Dynamo graph's inputs (torch logs them with the graph)."""
        found: dict[str, dict[str, Any]] = {}
        for event in self.reader.events([contract.DynamoOutputGraph.KIND]):
            graph = self._parse(contract.DynamoOutputGraph, event)
            if event.compile_id is not None and graph is not None and graph.sizes is not None:
                found[event.compile_id] = {k: v for k, v in graph.sizes.items() if k.startswith(("l_", "L_"))}
        return found

    def cache_events(self) -> list[tuple[str | None, str]]:
        """(compile id, "aotautograd_cache_hit" / "fx_graph_cache_miss" / ...) in the order torch logged them."""
        names = [f"artifact:{layer}_cache_{what}" for layer in ("aotautograd", "fx_graph")
                 for what in ("hit", "miss", "bypass")]
        return [(e.compile_id, e.name.removeprefix("artifact:")) for e in self.reader.events(names)]

    def minify_results(self) -> list[MinifyResult]:
        """What `dynscope minify` found for this run (it records its result into the capture)."""
        results = (self._parse(MinifyResult, e) for e in self.reader.events([MinifyResult.KIND]))
        return [r for r in results if r is not None]

    def fix_results(self) -> list[FixResult]:
        """The remedies `dynscope fix` proved for this run's problems (it records them into the capture)."""
        results = (self._parse(FixResult, e) for e in self.reader.events([FixResult.KIND]))
        return [r for r in results if r is not None]

    def errors(self) -> list[CompileError]:
        """Compiles that failed the program or its backend (not the frames Dynamo skipped)."""
        return [
            CompileError(c.compile_id, c.function, c.file, c.line, c.fail_type or "", c.fail_reason or "",
                         c.fail_file, c.fail_line)
            for c in self._compiles.values() if self.failure_kind(c) == "error"
        ]

    def skipped_frames(self) -> list[SkippedFrame]:
        """Frames Dynamo gave up on and ran in eager, the program unharmed (recompile-limit hits
        are listed apart: ``recompile_limit_hits``)."""
        return [
            SkippedFrame(c.compile_id, c.function, c.file, c.line, c.fail_type or "", c.fail_reason or "",
                         first_line(c.fail_reason) or c.fail_type or "", c.fail_file, c.fail_line)
            for c in self._compiles.values() if self.failure_kind(c) == "skipped"
        ]

    def recompile_limit_hits(self) -> list[RecompileLimitHit]:
        hits = []
        for c in self._compiles.values():
            if self.failure_kind(c) in ("limit", "error") and _is_recompile_limit(c.fail_reason):
                name, limit = _recompile_limit(c.fail_reason or "")
                hits.append(RecompileLimitHit(c.compile_id, c.function, c.file, c.line, limit, name,
                                              fatal=self.failure_kind(c) == "error"))
        return hits

    @cached_property
    def _fatal_compile(self) -> str | None:
        """The failed compile whose exception ended the program, when one did: the last failed
        compile of the exception's type (torch raises it from inside the compiled call)."""
        exception = self.exception
        if exception is None:
            return None
        failed = [c for c in self._compiles.values() if c.status == "failed" and c.fail_type == exception.type]
        return failed[-1].compile_id if failed else None

    def failure_kind(self, c: Compile) -> str | None:
        """"error" | "skipped" | "limit" for a failed compile, None for the others."""
        if c.status != "failed":
            return None
        if c.compile_id == self._fatal_compile or c.fail_type not in _SOFT_FAILURES:
            return "error"
        return "limit" if _is_recompile_limit(c.fail_reason) else "skipped"

    # -- per compile: guards, stages, kernels ------------------------------------------------

    def guards(self, compile_id: str) -> list[Guard]:
        events = self.reader.events(["dynamo_cpp_guards_str"], compile_id=compile_id)
        if not events:
            return []
        return parse_guard_tree(compile_id, self.reader.payload(events[-1].payload_hash) or "")

    def guard_count(self, compile_id: str) -> int | None:
        """How many guards a compile has: the checks of its recorded guard tree (what every view
        lists), else torch's own count from its metrics (which leaves some tree checks out)."""
        if self.reader.events(["dynamo_cpp_guards_str"], compile_id=compile_id):
            return len(self.guards(compile_id))
        return self.compile(compile_id).guard_count

    def stages(self, compile_id: str) -> list[Stage]:
        return list(self._compile_details(compile_id)["stages"])

    @cached_property
    def _recorded_stage_names(self) -> dict[str, set[str]]:
        event_stage = {e: s for e, (s, _) in {**pipeline.SINGLE_STAGE_EVENTS, **pipeline.PER_GRAPH_EVENTS}.items()}
        found: dict[str, set[str]] = {}
        for cid, name in self.reader.compile_event_names(
            [*event_stage, contract.log_tap_kind("bytecode")], name_like="artifact:%_BYTECODE"
        ):
            stage = event_stage.get(name, "bytecode")
            found.setdefault(cid, set()).add(stage)
        return found

    def recorded_stage_names(self, compile_id: str) -> list[str]:
        """Canonical names of the stages recorded for a compile, in pipeline order (one cheap query
        for the whole capture, so a summary of thousands of compiles stays fast)."""
        recorded = self._recorded_stage_names.get(compile_id, set())
        return [name for name in pipeline.CANONICAL_STAGES if name in recorded]

    def stage(self, compile_id: str, key: str) -> Stage:
        for stage in self._compile_details(compile_id)["stages"]:
            if stage.key == key:
                return stage
        keys = ", ".join(s.key for s in self._compile_details(compile_id)["stages"])
        raise DynscopeError(f"compile {compile_id} has no stage {key!r} (stages: {keys})")

    def output_code_index(self) -> dict[str, tuple[int, list[str]]]:
        """Per compile id: its output code's bytes and its kernels' names, for whole-run views
        (one query, no stages built; a compile's forward and backward code together)."""
        index: dict[str, tuple[int, list[str]]] = {}
        for event in self.reader.events(["inductor_output_code"]):
            if event.compile_id is None or event.payload_hash is None:
                continue
            size, names = index.get(event.compile_id, (0, []))
            code = self.reader.payload(event.payload_hash) or ""
            index[event.compile_id] = (size + self.reader.payload_size(event.payload_hash), names + kernel_names(code))
        return index

    def kernels(self, compile_id: str) -> list[Kernel]:
        return list(self._compile_details(compile_id)["kernels"])

    def stage_text(self, stage: Stage, variant: str | None = None) -> str:
        """The stage's text (IR, code). ``variant`` picks another view, e.g. "before" / "modified"."""
        if stage.name == "kernel":
            for kernel in self.kernels(stage.compile_id):
                if kernel.key == stage.key:
                    return kernel.source
        digest = stage.variants.get(variant) if variant else stage.payload_hash
        if variant and digest is None:
            raise DynscopeError(f"stage {stage.key} has no {variant!r} view (views: {', '.join(stage.variants)})")
        return self.reader.payload(digest) or ""

    def fx_graph(self, stage: Stage) -> FxGraph | None:
        if stage.structure_hash is None:
            return None
        data = self.reader.json_payload(stage.structure_hash)
        return FxGraph(data if isinstance(data, dict) else {})

    def _compile_details(self, compile_id: str) -> dict[str, Any]:
        with self._lock:
            if compile_id in self._per_compile:
                self._per_compile.move_to_end(compile_id)
                return self._per_compile[compile_id]
        compile_ = self.compile(compile_id)
        details = _StageBuilder(self, compile_, self.reader.events(compile_id=compile_id)).build()
        with self._lock:
            self._per_compile[compile_id] = details
            while len(self._per_compile) > _CACHE_LIMIT:
                self._per_compile.popitem(last=False)
        return details


class _StageBuilder:
    """Assemble one compile's pipeline from its events (see dynscope.model.stages)."""

    def __init__(self, capture: Capture, compile_: Compile, events: list[Event]) -> None:
        self.capture = capture
        self.reader = capture.reader
        self.compile = compile_
        self.events = events
        graphs = [(capture._parse(contract.FxGraphStructure, e), e) for e in events
                  if e.name == contract.FxGraphStructure.KIND]
        self.structure = {g.event_id: e.payload_hash for g, e in graphs if g is not None}
        self.names = {e.name for e in events}

    def build(self) -> dict[str, Any]:
        found: dict[str, tuple[str, str | None, dict[str, Event]]] = {}
        self._bytecode(found)
        for event in self.events:
            if event.name in pipeline.SINGLE_STAGE_EVENTS:
                name, variant = pipeline.SINGLE_STAGE_EVENTS[event.name]
                self._add(found, name, None, variant, event)
        inductor_events = [e for e in self.events if e.name in pipeline.PER_GRAPH_EVENTS
                           or e.name in pipeline.SECTION_START_EVENTS or e.name.startswith("artifact:inductor_provenance")
                           or e.name == "artifact:triton_kernel_info"]
        kernels: list[Kernel] = []
        sections = pipeline.split_graph_sections(
            inductor_events, has_inference="aot_inference_graph" in self.names, explicit_role=self._role_of
        ) if inductor_events else []
        for section in sections:
            for event in section.events:
                if event.name in pipeline.PER_GRAPH_EVENTS:
                    name, variant = pipeline.PER_GRAPH_EVENTS[event.name]
                    self._add(found, name, section.role, variant, event)
        stages = {key: self._stage(key, *entry) for key, entry in found.items()}
        for section in sections:
            kernels += self._kernels(section, stages)
        ordered = self._with_missing(stages, [s.role for s in sections])
        ordered += [self._kernel_stage(k) for k in kernels]
        return {"stages": ordered, "kernels": kernels}

    def _role_of(self, events: list[Event]) -> str | None:
        for event in events:
            if event.name == "inductor_output_code":  # the role is on the code's first lines
                return graph_role(self.reader.payload(event.payload_hash, limit=_HEAD_BYTES) or "")
        return None

    def _bytecode(self, found: dict[str, tuple[str, str | None, dict[str, Event]]]) -> None:
        """Original and modified bytecode of the final attempt, from the bytecode log tap
        (or the trace's resume-function artifacts)."""
        seen: dict[str, Event] = {}
        for event in self.events:
            if event.name == contract.log_tap_kind("bytecode"):
                head = (self.reader.payload(event.payload_hash, limit=_HEAD_BYTES) or "")[:40]
                variant = "original" if head.startswith("ORIGINAL") else "modified" if head.startswith("MODIFIED") else None
            elif event.name.endswith("_ORIGINAL_BYTECODE") or event.name.endswith("_MODIFIED_BYTECODE"):
                variant = "original" if event.name.endswith("_ORIGINAL_BYTECODE") else "modified"
            else:
                continue
            if variant:
                seen[variant] = event
        for variant, event in sorted(seen.items()):
            self._add(found, "bytecode", None, variant, event)

    def _add(self, found: dict[str, tuple[str, str | None, dict[str, Event]]], name: str, graph: str | None,
             variant: str, event: Event) -> None:
        key = pipeline.stage_key(name, graph)
        found.setdefault(key, (name, graph, {}))[2][variant] = event  # a later attempt wins

    def _stage(self, key: str, name: str, graph: str | None, variants: dict[str, Event]) -> Stage:
        # The stage's main text is the graph as that stage produced it ("after" its passes).
        main = next(variants[v] for v in (*_MAIN_VARIANTS, *variants) if v in variants)
        return Stage(
            compile_id=self.compile.compile_id,
            name=name,
            graph=graph,
            key=key,
            recorded=True,
            missing_reason=None,
            language=pipeline.STAGE_LANGUAGE[name],
            event_id=main.id,
            payload_hash=main.payload_hash,
            size=self.reader.payload_size(main.payload_hash),
            variants={v: e.payload_hash for v, e in variants.items()},
            structure_hash=self.structure.get(main.id),
        )

    def _with_missing(self, stages: dict[str, Stage], roles: list[str | None]) -> list[Stage]:
        """Every stage of the pipeline in order; those torch did not emit say why."""
        has_inference = "aot_inference" in stages
        has_training = any(k in stages for k in ("aot_joint", "aot_forward", "aot_backward"))
        # Per-graph stages are listed per graph only once Inductor compiled one; otherwise a
        # single row says why none exists.
        graphs: list[str | None] = [r for r in roles if r] or [None]
        if roles and has_training and "backward" not in graphs:
            graphs.append("backward")
        ordered: list[Stage] = []
        for name in pipeline.CANONICAL_STAGES:
            if (name == "aot_inference" and has_training) or (
                name in ("aot_joint", "aot_forward", "aot_backward") and has_inference
            ):
                continue
            for graph in (graphs if name in pipeline.PER_GRAPH_STAGES else [None]):
                key = pipeline.stage_key(name, graph)
                if key in stages:
                    ordered.append(stages[key])
                else:
                    ordered.append(Stage(self.compile.compile_id, name, graph, key, False,
                                         self._missing_reason(name, graph, stages), pipeline.STAGE_LANGUAGE[name]))
        return ordered

    def _missing_reason(self, name: str, graph: str | None, stages: dict[str, Stage]) -> str:
        c = self.compile
        probes = self.capture.run.probes
        if c.status == "incomplete":
            return "not reached: the run ended during this compile"
        if c.status == "failed" and name != "bytecode":
            return f"not reached: the compile failed ({c.fail_type})"
        if name == "bytecode":
            if probes.get("log:bytecode") is False:
                return self.capture.run.probe_details.get("log:bytecode") or "not recorded: this torch has no bytecode log"
            return "not logged by torch for this frame"
        if c.graph_op_count == 0 or c.status == "skipped":
            return "no graph: Dynamo found no tensor operations to compile in this frame"
        has_aot = any(k in stages for k in ("aot_joint", "aot_forward", "aot_backward", "aot_inference"))
        has_inductor = any(s.name in ("post_grad", "output_code") for s in stages.values())
        if name.startswith("aot_"):
            if "artifact:aotautograd_cache_hit" in self.names:
                return "skipped: AOTAutograd cache hit (run without --keep-caches to record it)"
            return 'not run: the backend does not use AOTAutograd (e.g. backend="eager")'
        if not has_inductor:
            if "artifact:fx_graph_cache_hit" in self.names:
                return "skipped: Inductor FX graph cache hit (run without --keep-caches to record it)"
            if not has_aot:
                return 'not run: the backend does not use Inductor (e.g. backend="eager")'
            return 'not run: the backend does not use Inductor (e.g. backend="aot_eager")'
        if "artifact:fx_graph_cache_hit" in self.names and name in ("pre_grad", "post_grad", "scheduler_ir"):
            return "skipped: Inductor FX graph cache hit (run without --keep-caches to record it)"
        # Only when no stage of the backward graph exists: with one, this stage is missing for its own reason.
        if graph == "backward" and not any(s.graph == "backward" for s in stages.values()):
            return "not compiled: Inductor compiles the backward graph on the first .backward(), which this run did not reach"
        if name == "scheduler_ir":
            if probes.get("log:ir_pre_fusion") is False:
                return (self.capture.run.probe_details.get("log:ir_pre_fusion")
                        or "not recorded: this torch has no scheduler IR log")
            return "not logged: Inductor scheduled no fusible nodes for this graph"
        if name == "pre_grad":
            return "not logged by this torch"
        return "not emitted by torch for this compile"

    def _kernels(self, section: pipeline.GraphSection, stages: dict[str, Stage]) -> list[Kernel]:
        by_name = {e.name: e for e in section.events}
        code_event = by_name.get("inductor_output_code")
        if code_event is None:
            return []
        code = self.reader.payload(code_event.payload_hash) or ""
        node_map = _json_payload(self.reader, by_name.get("artifact:inductor_provenance_tracking_node_mappings"))
        stack_map = _json_payload(self.reader, by_name.get("artifact:inductor_provenance_tracking_kernel_stack_traces"))
        kernel_info = _json_payload(self.reader, by_name.get("artifact:triton_kernel_info"))
        code_to_post = node_map.get("cppCodeToPost") or {}
        post_to_pre = node_map.get("postToPre") or {}
        post_grad = stages.get(pipeline.stage_key("post_grad", section.role))
        post_graph = self.capture.fx_graph(post_grad) if post_grad else None
        kernels = []
        for k in split_kernels(code):
            handle = _provenance_handle(k.name, list(code_to_post) + list(stack_map))
            torch_nodes = code_to_post.get(handle) if handle else None
            post_nodes = tuple(torch_nodes or k.post_grad_nodes)
            origins = [o for n in post_nodes for o in post_to_pre.get(n, ())] or list(k.origin_nodes)
            lines = [f for text in (stack_map.get(handle) or ()) for f in parse_stack_text(text)] if handle else []
            if not lines and post_graph is not None:
                lines = [post_graph.by_name[n].user_frame for n in post_nodes
                         if n in post_graph.by_name and post_graph.by_name[n].user_frame]
            info = kernel_info.get(k.name) or {}
            kernels.append(Kernel(
                compile_id=self.compile.compile_id,
                graph=section.role,
                name=k.name,
                language=k.language,
                source=k.source,
                launch=k.launch,
                compile_time_s=info["compile_time_us"] / 1e6 if isinstance(info.get("compile_time_us"), (int, float)) else None,
                post_grad_nodes=post_nodes,
                origin_nodes=tuple(dict.fromkeys(origins)),
                source_lines=tuple(dict.fromkeys(lines)),
                provenance="torch" if handle else ("comments" if post_nodes or origins else None),
            ))
        return kernels

    def _kernel_stage(self, kernel: Kernel) -> Stage:
        return Stage(self.compile.compile_id, "kernel", kernel.graph, kernel.key, True, None,
                     kernel.language, size=len(kernel.source))


def _is_runner_frame(path: str | None) -> bool:
    if not path:
        return False
    return path.startswith("<frozen runpy") or path.startswith(_DYNSCOPE_DIR) or path == runpy.__file__


def _provenance_handle(kernel_name: str, handles: list[str]) -> str | None:
    """Torch keys provenance by "<kernel>:<debug handle>"; repeated extern calls are "#2", "#3"."""
    base, _, nth = kernel_name.partition("#")
    matches = list(dict.fromkeys(h for h in handles if h.rsplit(":", 1)[0] == base))
    index = int(nth) - 1 if nth else 0
    return matches[index] if index < len(matches) else None


def _json_payload(reader: CaptureReader, event: Event | None) -> dict[str, Any]:
    if event is None:
        return {}
    try:
        value = reader.json_payload(event.payload_hash)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# Failures Dynamo answers by running the frame in eager without telling the program
# (convert_frame's "soft" failures); any other failure is an error.
_SOFT_FAILURES = ("Unsupported", "UserError")
_LIMIT_TEXT = re.compile(r"recompile limit exceeded|cache_size_limit|recompile_limit", re.IGNORECASE)
_LIMIT_VALUE = re.compile(r"exceeding the (?P<name>\w+) cache size limit \(currently set to (?P<value>\d+)\)")


def _is_recompile_limit(reason: str | None) -> bool:
    if not reason:
        return False
    return bool(_LIMIT_TEXT.search(first_line(reason)) or _LIMIT_VALUE.search(reason))


def _recompile_limit(reason: str) -> tuple[str, int | None]:
    """(config name, value) from torch's "exceeding the recompile_limit cache size limit (currently set to 8)"."""
    match = _LIMIT_VALUE.search(reason)
    if match:
        return match["name"], int(match["value"])
    named = re.search(r"(accumulated_recompile_limit|recompile_limit|cache_size_limit)", reason)
    return (named.group(1) if named else "recompile_limit"), None


def _named_by_frame(compiles: dict[str, Compile]) -> dict[str, Compile]:
    """A compile that failed before Dynamo looked at the code (the recompile limit) has no name
    in torch's metrics: it is the same code object as the other compiles of its frame."""
    named = {c.frame_id: c for c in compiles.values() if c.function != "?" and c.frame_id is not None}
    for cid, c in compiles.items():
        sibling = named.get(c.frame_id)
        if c.function == "?" and sibling is not None:
            compiles[cid] = dataclasses.replace(c, function=sibling.function, file=c.file or sibling.file,
                                                line=c.line or sibling.line)
    return compiles


def _split_compile_id(cid: str) -> tuple[int | None, int | None]:
    parts = cid.lstrip("!").split("/")
    try:
        return int(parts[-2]), int(parts[-1])
    except (IndexError, ValueError):
        return None, None


def _compile_times(m: contract.CompilationMetrics, bwd: contract.BackwardMetrics | None) -> CompileTimes:
    total = m.entire_frame_compile_time_s
    backend = m.backend_compile_time_s
    inductor = m.inductor_compile_time_s
    codegen = m.code_gen_time_s
    backward_us = (bwd.backward_cumulative_compile_time_us or bwd.duration_us) if bwd else None

    def diff(a: float | None, b: float | None) -> float | None:
        return None if a is None else max(a - (b or 0.0), 0.0)

    return CompileTimes(
        total=total,
        dynamo=diff(total, backend),
        aot_autograd=diff(backend, inductor),
        inductor=diff(inductor, codegen),
        codegen=codegen,
        backward=backward_us / 1e6 if backward_us else None,
    )


def _guard_failure(text: str, probed: contract.GuardFailureSeen | None) -> GuardFailure:
    """Parse '0/0: n == 2   # return x * n  # f.py:4 in f\\nUser stack trace: ...'."""
    first = text.split("\n", 1)[0]
    failed_id, sep, rest = first.partition(": ")
    if not sep or not re.fullmatch(r"!?[\d/]+(_\d+)?", failed_id):
        failed_id, rest = "", first
    parts = rest.split("  #")
    guard = parts[0].strip()
    user_code = parts[1].strip() if len(parts) > 2 and parts[1].strip() else None
    expected = actual = None
    match = _EXPECTED_ACTUAL.search(guard)
    flag = _EXPECTED_FLAG.search(guard)
    if match:
        expected, actual = match.group("expected"), match.group("actual")
    elif flag:  # "tensor 'x' requires_grad mismatch. expected requires_grad=1": a flag has two values
        expected = f"{flag['name']}={flag['value']}"
        actual = f"{flag['name']}={1 - int(flag['value'])}"
    else:
        expected = _expected_from_guard(guard)
        actual = probed.actual if probed else None
    return GuardFailure(failed_id, guard, probed.guard if probed else guard, expected, actual, user_code)


_EXPECTED_FLAG = re.compile(r"mismatch\. expected (?P<name>\w+)=(?P<value>[01])\.?$")


def _expected_from_guard(guard: str) -> str | None:
    """'n == 2' -> '2'; "mode == 'a'" -> "'a'"; 'x is None' -> 'None'; 'not ___dict_contains(...)' -> None.
    Torch's prose ("... mismatch. expected ...") is not a comparison: None."""
    match = re.fullmatch(r"(?P<lhs>.+?)\s*==\s*(?P<rhs>.+)|(?P<lhs2>.+?)\s+is\s+(?P<rhs2>.+)", guard)
    if not match or "mismatch" in guard:
        return None
    return match.group("rhs") or match.group("rhs2")
