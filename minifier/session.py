"""dynscope minify from start to end: detect, bisect, shrink, write and prove a repro.

1. Detect: run the program once under the recorder and the failure probe (or read the
   graph of one compile from a capture); the first failing graph is the case.
2. Bisect backends: the stages before the program's own backend (eager -> aot_eager ->
   aot_eager_decomp_partition -> inductor) are tried on the whole graph; the first that
   fails the same way is the culprit, else the program's backend is.
3. Shrink the graph with the culprit backend (minifier/shrink.py). Its first success proves
   the failure replays from the graph's structure alone (random inputs first, the recorded
   values only if the failure needs them). The backend chain is confirmed on the small graph.
4. Write repro.py and prove it in a fresh process, while the worker bisects the culprit
   backend's subsystems on the small graph (minifier/bisect.py).
5. Record the result: result.json, and the capture's ``dynscope:minify_result`` event.

When the failure does not replay outside the user's process (their own backend or
decomposition, state their program set up), the traceback of the original exception still
names the layer (minifier/attribution.py), and the report says why there is no repro.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from dynscope.errors import DynscopeError
from dynscope.events import MinifyResult, write
from dynscope.minifier import files, replay_settings
from dynscope.minifier.bisect import (
    BACKEND_CHAIN,
    STAGE_OF_BACKEND,
    SUBSYSTEM_TEXT,
    BackendVerdict,
    SubsystemVerdict,
    bisect_backends,
    bisect_subsystems,
    chain_for,
)
from dynscope.minifier.case import Case, case_from_capture
from dynscope.minifier.checker import Checker, CheckResult, Settings
from dynscope.minifier.fragment import Fragment
from dynscope.minifier.repro import REPRO_FILE, REPRO_VALUES_FILE, ReproSpec, render
from dynscope.minifier.shrink import minimize
from dynscope.minifier.signature import Signature
from dynscope.minifier.suspect import Suspect, end_node, subgraph_ending_at
from dynscope.minifier.worker import STARTUP_TIMEOUT_S, Worker
from dynscope.runner.cache_dirs import private_cache_dir
from dynscope.runner.program import Program


class Progress(Protocol):
    def stage(self, text: str) -> None: ...
    def update(self, *, checks: int | None = None, nodes: int | None = None, detail: str | None = None) -> None: ...


@dataclass
class Options:
    out_dir: str
    timeout: float
    accuracy: dict[str, float] | None  # {"rtol", "atol"} with --accuracy
    program: Program | None = None
    capture: str | None = None
    compile_id: str | None = None
    backend: str = "inductor"  # for --from: the capture does not say which backend failed
    resume: bool = False
    command: list[str] = field(default_factory=list)
    suspect: Suspect | None = None  # --suspect: start from the subgraph ending at the numerics suspect


@dataclass
class Outcome:
    """Everything the report, result.json and the capture event say."""

    compile_id: str | None
    kind: str | None
    signature: str | None
    culprit_stage: str | None  # dynamo | aot_autograd | inductor | backend | user
    culprit_backend: str | None
    culprit: str | None  # in words, subsystem and op included
    passed_backends: list[str]
    subsystem: str | None
    op: str | None
    repro: str | None
    verified: bool
    verify: str | None  # what the repro did in a fresh process, in words
    checks_run: int
    checks_total: int
    nodes_before: int | None
    nodes_after: int | None
    wall_s: float
    out_dir: str
    capture: str | None
    backend: str | None
    attribution: str | None
    notes: list[str]
    reproduced: bool = True

    def result(self) -> MinifyResult:
        """The result in its one recorded form (dynscope.events.MinifyResult)."""
        fields = asdict(self)
        return MinifyResult.parse({name: fields[name] for name in MinifyResult.json_paths()})

    def to_json(self) -> dict[str, Any]:
        """result.json: the recorded result, and where this run's files and capture are."""
        return {**self.result().to_json(), "out_dir": self.out_dir, "capture": self.capture}


def run(options: Options, progress: Progress) -> Outcome:
    started = time.monotonic()
    out_dir = os.path.abspath(options.out_dir)
    recorded = None
    if options.capture is not None:  # read it first: a bad capture or compile id is one line, and no files
        progress.stage(f"reading compile {options.compile_id} from {os.path.basename(options.capture)}")
        recorded = case_from_capture(options.capture, options.compile_id or "", options.backend)
        if options.suspect is not None:
            recorded = (_from_suspect(recorded[0], options.suspect), recorded[1])
    _prepare(out_dir, resume=options.resume)
    # Every run of the session (the program's, the checks', the repro's proof) compiles in one
    # private cache directory: a graph checked again unchanged loads from it, a changed one (or
    # another backend or setting) misses, and the user's own cache is neither read nor written.
    with private_cache_dir("minify") as cache_dir:
        worker = Worker(os.path.join(out_dir, files.WORKER_LOG), cache_dir=cache_dir)
        try:
            # Start the worker now: it imports torch and warms Inductor up while the program runs.
            worker.start()
            if recorded is not None:
                case, capture_path = _with_configs(recorded, worker), options.capture
            else:
                case, capture_path = _run_program(options, out_dir, progress, cache_dir)
            outcome = _minify(case, options, out_dir, worker, progress, cache_dir)
        finally:
            worker.close()
    outcome.wall_s = round(time.monotonic() - started, 2)
    outcome.capture = capture_path
    if capture_path and not record_result(capture_path, outcome):
        outcome.notes.append(f"the result could not be recorded into {capture_path} (not writable)")
    _write_json(os.path.join(out_dir, files.RESULT_FILE), outcome.to_json())
    return outcome


# -- loading the case ---------------------------------------------------------------------------


def _prepare(out_dir: str, *, resume: bool) -> None:
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise DynscopeError(f"--out {out_dir} is a file, not a directory")
    try:
        os.makedirs(out_dir, exist_ok=True)
        if resume:
            return
        for name in (files.FAILURE_FILE, files.VALUES_FILE, files.CHECKS_FILE, files.RESULT_FILE, files.MARKER_FILE,
                     REPRO_FILE, REPRO_VALUES_FILE, files.WORKER_LOG, files.VERIFY_LOG, files.VERDICT_FILE):
            path = os.path.join(out_dir, name)
            if os.path.lexists(path):
                os.remove(path)
    except OSError as e:
        raise DynscopeError(f"cannot use --out {out_dir}: {e.strerror or e}") from None
    shutil.rmtree(os.path.join(out_dir, files.GRAPHS_DIR), ignore_errors=True)


def _from_suspect(case: Case, suspect: Suspect) -> Case:
    """The case cut to the subgraph that ends at the numerics suspect (minifier/suspect.py)."""
    end = end_node(case.fragment, suspect)
    before = len(case.fragment.compute_nodes)
    case.fragment = subgraph_ending_at(case.fragment, end)
    where = f" at {suspect.file}:{suspect.line}" if suspect.file and suspect.line else ""
    kernel = f", kernel {suspect.kernel}" if suspect.kernel else ""
    case.notes.append(f"started from the first numerics suspect {suspect.node} ({suspect.op}{kernel}){where}: the "
                      f"subgraph ending at {end}, {len(case.fragment.compute_nodes)} of {before} compute nodes")
    if suspect.direction == "backward":
        case.notes.append("the suspect is in the backward graph: the subgraph ends at the forward node it was made from, "
                          "and its gradients are compared too")
    return case


def _with_configs(recorded: tuple[Case, dict[str, dict[str, Any]]], worker: Worker) -> Case:
    """A capture holds full config dumps; the worker (which has torch) keeps the non-defaults."""
    from dynscope.minifier.case import apply_recorded_configs

    case, dumps = recorded
    if dumps:
        reply = worker.request({"op": "configs", "dumps": dumps}, STARTUP_TIMEOUT_S)
        apply_recorded_configs(case, (reply.data or {}).get("configs") or {})
    return case


def _run_program(options: Options, out_dir: str, progress: Progress, cache_dir: str) -> tuple[Case, str | None]:
    from dynscope.minifier.case import case_from_failure
    from dynscope.minifier.detect import detect

    failure_path = os.path.join(out_dir, files.FAILURE_FILE)
    if options.resume and os.path.exists(failure_path):
        progress.stage("resuming")
        case = case_from_failure(_read_json(failure_path), out_dir)
        return case, _existing_capture(out_dir)
    assert options.program is not None
    progress.stage(f"running {options.program.display}")
    detection = detect(options.program, out_dir, accuracy=options.accuracy, timeout=options.timeout,
                       command=options.command, on_status=lambda text: progress.update(detail=text),
                       cache_dir=cache_dir)
    if detection.case is None:
        raise _no_failure(options, detection)
    return detection.case, detection.capture_path


def _existing_capture(out_dir: str) -> str | None:
    captures = [n for n in os.listdir(out_dir) if n.endswith(".dynscope")]
    return os.path.join(out_dir, captures[0]) if captures else None


def _no_failure(options: Options, detection: Any) -> DynscopeError:
    program = options.program.display if options.program else "the program"
    if detection.compile_errors:
        error = detection.compile_errors[0]
        where = f" at {error.file}:{error.line}" if error.file else ""
        return DynscopeError(
            f"the failure is in Dynamo (graph capture) itself, before any graph reached a backend: compile "
            f"{error.compile_id} of {error.function}{where} failed with {error.fail_type}: "
            f"{(error.fail_reason or '').splitlines()[0] if error.fail_reason else ''} — there is no graph to minify "
            f"(see {detection.program_log})", exit_code=1)
    if detection.returncode != 0:
        return DynscopeError(
            f"no torch.compile failure found: {program} exited with status {detection.returncode} outside compiled "
            f"code (its output is in {detection.program_log})", exit_code=1)
    hint = "" if options.accuracy else " (for wrong results, add --accuracy)"
    return DynscopeError(f"no failure found: {program} compiled and ran cleanly{hint}", exit_code=1)


# -- minifying -----------------------------------------------------------------------------------


def _minify(case: Case, options: Options, out_dir: str, worker: Worker, progress: Progress,
            cache_dir: str) -> Outcome:
    settings = Settings(backend=case.backend, configs=case.configs, grad_enabled=case.grad_enabled,
                        accuracy=options.accuracy or case.accuracy, values=case.values)
    checker = Checker(worker, settings, timeout=options.timeout, cache_path=os.path.join(out_dir, files.CHECKS_FILE),
                      on_check=lambda _r: progress.update(checks=checker.checks_total))
    checker.target = case.target
    fragment = case.fragment
    outcome = _outcome(case, out_dir)
    progress.update(nodes=len(fragment.compute_nodes))
    if checker.target is None:  # from a capture: the first check shows how it fails
        progress.stage("compiling the graph")
        _learn_target(checker, case, fragment, options)

    # 2. Which stage fails? The stages before the program's own backend are cheap: try them on
    #    the whole graph. If none fails, the program's backend is the culprit, and shrinking
    #    the graph with it proves the failure replays outside the program.
    progress.stage("bisecting backends")
    if case.custom_backend:
        chain: tuple[str, ...] = BACKEND_CHAIN
        case.notes.append(f"the failing backend {case.backend['label']} is defined in your program; "
                          "torch's own backends were tried instead")
    else:
        chain = chain_for(case.backend["name"])
    earlier = chain if case.custom_backend else chain[:-1]
    verdict = bisect_backends(checker, fragment, earlier, lambda name: _backend_spec(case, name),
                              lambda text: progress.update(detail=text))
    if verdict.culprit is None and case.custom_backend:
        case.notes.append(f"torch's own backends ({', '.join(verdict.passed)}) run this graph cleanly: the failure "
                          "comes from what your program gives torch.compile, so no torch-only repro can show it")
        return _finish(outcome, checker, case, reproduced=False, verdict=verdict)
    culprit_name = verdict.culprit or chain[-1]

    # 3. Shrink with the first backend that fails.
    progress.stage(f"shrinking the graph ({culprit_name})")
    checker.settings.backend = _backend_spec(case, culprit_name)
    small = _shrink(checker, case, fragment, progress)
    if small is None:
        case.notes.append(_not_reproduced_note(case, checker.check(fragment)))
        return _finish(outcome, checker, case, reproduced=False)
    # The repro states which backends pass: confirm that on the small graph (cheap).
    verdict = bisect_backends(checker, small, chain_for(culprit_name) if culprit_name in BACKEND_CHAIN else chain,
                              lambda name: _backend_spec(case, name), lambda text: progress.update(detail=text))
    if verdict.culprit is None:
        verdict = BackendVerdict(culprit_name, verdict.passed)
    culprit_backend = verdict.culprit or culprit_name  # the small graph's culprit, else the big one's
    culprit = _backend_spec(case, culprit_backend)
    progress.update(nodes=len(small.compute_nodes))

    # 4. The repro, proven in a fresh process while the worker bisects subsystems.
    progress.stage("writing repro.py")
    repro_path = _write_repro(worker, case, small, culprit, settings, checker.use_values, out_dir, verdict)
    verification: dict[str, Any] = {}
    prover = threading.Thread(target=_verify_into, args=(repro_path, options.timeout, out_dir, verification, options.resume,
                                                       cache_dir))
    prover.start()
    subsystem = None
    plan = _bisector_plan(worker).get(culprit_backend, [])
    if plan:
        progress.stage(f"bisecting {verdict.culprit} subsystems (and proving repro.py)")
        # Count every pass, decomposition and lowering the small graph goes through.
        baseline = checker.check(small, backend=culprit,
                                 subsystem={"backend": verdict.culprit, "name": "*", "limit": None})
        subsystem = bisect_subsystems(checker, small, culprit, plan, baseline.applications,
                                      lambda text: progress.update(detail=text))
    else:
        progress.stage("proving repro.py in a fresh process")
    prover.join()
    outcome.repro = repro_path
    observed: Signature | None = verification.get("signature")
    outcome.verified = checker.target is not None and checker.target.same_as(observed)
    outcome.verify = (observed.describe() if observed
                           else verification.get("error", "it ran without failing"))
    if verification.get("reused"):
        case.notes.append(f"{REPRO_FILE} is byte for byte the one the last run proved in a fresh process: "
                          "its verdict was reused, not run again")
    return _finish(outcome, checker, case, reproduced=True, verdict=verdict, subsystem=subsystem, small=small)


def _shrink(checker: Checker, case: Case, fragment: Fragment, progress: Progress) -> Fragment | None:
    """The minimized graph, or None when the graph does not fail the same way outside the
    program. Random inputs first; the recorded values only if those do not show it (then
    every later check uses them too)."""
    def on_step(step: str, current: Fragment) -> None:
        progress.update(nodes=len(current.compute_nodes), detail=step)

    small = minimize(checker, fragment, on_step=on_step)
    if small is None and case.values is not None:
        checker.use_values = True
        small = minimize(checker, fragment, on_step=on_step)
        if small is not None:
            case.notes.append("the failure needs the recorded input values (random ones do not show it)")
    return small


def _learn_target(checker: Checker, case: Case, fragment: Fragment, options: Options) -> None:
    result = checker.check(fragment)
    if result.invalid:  # only the allow-list's operations are rebuilt: a graph naming others is refused
        raise DynscopeError(f"compile {case.compile_id} cannot be rebuilt from the capture: {result.invalid}")
    if result.signature is None:
        hint = "" if options.accuracy else " (for wrong results, add --accuracy)"
        dropped = replay_settings.dropped_note(case.dropped_settings)
        raise DynscopeError(f"no failure found: compile {case.compile_id} compiles and runs cleanly with "
                            f"backend={case.backend['name']!r} when rebuilt from the capture{hint}"
                            + (f"; {dropped}" if dropped else ""), exit_code=1)
    checker.target = result.signature


def _not_reproduced_note(case: Case, result: CheckResult) -> str:
    got = result.invalid or (result.signature.describe() if result.signature else "it compiled and ran cleanly")
    return (f"the graph does not fail the same way outside your program ({got}): the failure depends on "
            "something your program sets up (a custom backend, decomposition or operator, or other state)")


def _backend_spec(case: Case, name: str) -> dict[str, Any]:
    """The user's backend keeps its mode and options; the bisection's other backends run plain."""
    if name == case.backend.get("name"):
        return case.backend
    return {"name": name, "options": None, "mode": None, "custom": False, "label": name}


def _bisector_plan(worker: Worker) -> dict[str, list[dict[str, Any]]]:
    reply = worker.request({"op": "plan"}, STARTUP_TIMEOUT_S)
    return (reply.data or {}).get("plan") or {}


def _write_repro(worker: Worker, case: Case, small: Fragment, backend: dict[str, Any], settings: Settings,
                 with_values: bool, out_dir: str, verdict: BackendVerdict) -> str:
    reply = worker.request({"op": "source", "graph": small.graph}, STARTUP_TIMEOUT_S)
    data = reply.data or {}
    if "source" not in data:
        raise DynscopeError(f"could not render the minimized graph: {data.get('error', 'the worker died')}")
    recorded: list[str] = []
    if with_values and case.values:
        saved = worker.request({"op": "repro_values", "fragment": small.to_json(), "values": case.values,
                                "out": os.path.join(out_dir, REPRO_VALUES_FILE)}, STARTUP_TIMEOUT_S)
        recorded = (saved.data or {}).get("names") or []
    target = case.target
    stage_text = STAGE_OF_BACKEND.get(verdict.culprit or "", (None, verdict.culprit))[1]
    details = [f"Fails with backend={backend['name']!r}: {stage_text}."]
    if verdict.passed:
        details.append(f"Passes with {', '.join(verdict.passed)}.")
    if case.compile_id:
        details.append(f"Minimized from compile {case.compile_id}: {len(case.fragment.compute_nodes)} -> "
                       f"{len(small.compute_nodes)} compute nodes.")
    spec = ReproSpec(
        fragment=small, forward_source=data["source"], imports=data.get("imports") or [], backend=backend,
        configs=settings.configs, grad_enabled=settings.grad_enabled, accuracy=settings.accuracy,
        recorded=recorded, title=f"torch.compile {target.describe() if target else 'failure'}".splitlines()[0][:200],
        details=details,
    )
    from dynscope.minifier.repro_check import problem

    text = render(spec)
    refused = problem(text, REPRO_VALUES_FILE)  # checked before it is written, run or shown
    if refused is not None:
        raise DynscopeError(f"{REPRO_FILE} was not written: the generated script failed dynscope's check: {refused}")
    path = os.path.join(out_dir, REPRO_FILE)
    with open(path, "w") as f:
        f.write(text)
    return path


def _verify_into(repro_path: str, timeout: float, out_dir: str, into: dict[str, Any], resume: bool,
                 cache_dir: str) -> None:
    from dynscope.minifier import verdicts
    from dynscope.minifier.verify import verify

    kept = os.path.join(out_dir, files.VERDICT_FILE)
    key = verdicts.digest([repro_path, os.path.join(out_dir, REPRO_VALUES_FILE)])
    if resume and (verdict := verdicts.recall(kept, key)) is not None:
        into["signature"], into["reused"] = verdict.signature, True
        return
    # A fresh process pays torch's import and Inductor's first compile again: allow for it.
    try:
        into["signature"] = verify(repro_path, timeout=timeout + 120, log_path=os.path.join(out_dir, files.VERIFY_LOG),
                                   cache_dir=cache_dir)
    except OSError as e:
        into["error"] = f"could not be run ({e})"
        return
    verdicts.remember(kept, key, verdicts.Verdict(into["signature"]))


def _outcome(case: Case, out_dir: str) -> Outcome:
    return Outcome(
        compile_id=case.compile_id, kind=case.kind or (case.target.kind if case.target else None),
        signature=case.target.describe() if case.target else None, culprit_stage=None, culprit_backend=None,
        culprit=None, passed_backends=[], subsystem=None, op=None, repro=None, verified=False,
        verify=None, checks_run=0, checks_total=0, nodes_before=len(case.fragment.compute_nodes),
        nodes_after=None, wall_s=0.0, out_dir=out_dir, capture=None, backend=case.backend.get("label"),
        attribution=case.attribution.describe() if case.attribution else None, notes=case.notes,
    )


def _finish(outcome: Outcome, checker: Checker, case: Case, *, reproduced: bool, verdict: BackendVerdict | None = None,
            subsystem: SubsystemVerdict | None = None, small: Fragment | None = None) -> Outcome:
    outcome.reproduced = reproduced
    outcome.checks_run, outcome.checks_total = checker.checks_run, checker.checks_total
    if outcome.kind is None and checker.target is not None:
        outcome.kind = checker.target.kind
    if outcome.signature is None and checker.target is not None:
        outcome.signature = checker.target.describe()
    if verdict is not None and verdict.culprit is not None:
        outcome.culprit_backend = verdict.culprit
        outcome.culprit_stage, outcome.culprit = STAGE_OF_BACKEND.get(verdict.culprit, (verdict.culprit, verdict.culprit))
        outcome.passed_backends = list(verdict.passed)
    elif case.attribution is not None:  # no replay: the traceback names the layer
        outcome.culprit_stage = case.attribution.layer
        outcome.culprit = case.attribution.describe()
        outcome.op = case.attribution.op
    if verdict is not None and verdict.culprit is None:
        outcome.passed_backends = list(verdict.passed)
    if subsystem is not None:
        outcome.subsystem = subsystem.subsystem
        outcome.culprit = f"{outcome.culprit} — {subsystem.describe()}"
        if subsystem.application:
            outcome.op = subsystem.application
        if subsystem.skipped:
            outcome.notes.append(f"not tried: {', '.join(SUBSYSTEM_TEXT.get(s, s) for s in subsystem.skipped)} "
                                 "(not used on this device)")
    if small is not None:
        outcome.nodes_after = len(small.compute_nodes)
        if outcome.op is None and len(small.compute_nodes) == 1:
            outcome.op = small.compute_nodes[0]["target"]
    return outcome


# -- recording -------------------------------------------------------------------------------------


def record_result(capture_path: str, outcome: Outcome) -> bool:
    """Append the result to the capture, where the model (Capture.minify_results) reads it."""
    import sqlite3

    from dynscope.store.header import is_capture_file
    from dynscope.store.writer import CaptureWriter

    if not is_capture_file(capture_path):
        return False
    try:
        writer = CaptureWriter.reopen(capture_path)
        try:
            write(writer, outcome.result(), compile_id=outcome.compile_id)
        finally:
            writer.close()
    except (sqlite3.Error, OSError):
        return False
    return True


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise DynscopeError(f"cannot read {path}: {type(e).__name__}") from None


def _write_json(path: str, data: Any) -> None:
    with open(path, "w") as f:
        json.dump(data, f, indent=2, default=str)
