"""Survey every model the installed libraries can build from a derived tiny config: which break under
`torch.compile(backend="eager")` in the generated program's steps (two eval sizes and a training step).

    python bench/generated/survey.py [--libraries transformers,diffusers] [--workers 2] [--timeout 180]
                                     [--only SPEC,...] [--out bench/generated/survey.json]

Each model gets one of: `unbuildable` (the derived config or inputs fail: reason kept), `fails-eager` (the
uncompiled steps raise), `fails-compiled` (the compiled steps raise where eager did not), `timeout`, `crashed`,
`clean` (no graph break) or `breaks` (occurrences and distinct reasons counted by a wrapper of Dynamo's
`log_graph_break`). The models that break are the bench (`bench/hf_rewrites.py --generated`), split in halves by
`derive.half_of`.

Workers run many models in one process (importing torch and transformers once) and a model's own time limit is
an alarm; a worker that dies or hangs is replaced and the model it held is recorded as crashed or timed out.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA = "dynscope.generated-survey/1"


@dataclass(frozen=True)
class Outcome:
    spec: str
    half: str
    status: str  # unbuildable | fails-eager | fails-compiled | timeout | crashed | clean | breaks
    reason: str = ""
    breaks: int = 0
    distinct: int = 0
    seconds: float = 0.0


def all_specs(libraries: list[str]) -> list[str]:
    specs: list[str] = []
    if "transformers" in libraries:
        from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

        for names in MODEL_MAPPING_NAMES.values():
            specs.extend(f"transformers:{n}" for n in ((names,) if isinstance(names, str) else names))
    if "diffusers" in libraries:
        import diffusers
        import diffusers.models

        for name in sorted(dir(diffusers.models)):
            obj = getattr(diffusers.models, name)
            if isinstance(obj, type) and issubclass(obj, diffusers.ModelMixin) and obj is not diffusers.ModelMixin \
                    and not name.startswith("Multi"):
                specs.append(f"diffusers:{name}")
    return sorted(set(specs))


# ---- the worker: one process, many models -------------------------------------------------------------------


class _Alarm(Exception):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise _Alarm()


def survey_one(spec: str, timeout: int) -> Outcome:
    import torch
    from build import Unbuildable, build
    from derive import half_of
    from program import one_call
    from torch._dynamo.symbolic_convert import InstructionTranslatorBase

    started = time.perf_counter()
    name = spec.partition(":")[2]

    def outcome(status: str, reason: str = "", breaks: int = 0, distinct: int = 0) -> Outcome:
        return Outcome(spec, half_of(name), status, reason[:300], breaks, distinct,
                       round(time.perf_counter() - started, 1))

    reasons: dict[str, int] = {}
    original = InstructionTranslatorBase.log_graph_break

    def counting(self: object, code_options: object, reason: str, exc: object) -> None:
        if not getattr(exc, "logged", False):
            key = f"{getattr(exc, 'gb_type', None) or type(exc).__name__} at {_where(exc)}"
            reasons[key] = reasons.get(key, 0) + 1
        original(self, code_options, reason, exc)  # type: ignore[arg-type]

    signal.alarm(timeout)
    stage = "build"
    try:
        built = build(spec)
        stage = "eager"
        one_call(built.model, built)
        stage = "compiled"
        torch._dynamo.reset()
        InstructionTranslatorBase.log_graph_break = counting  # type: ignore[method-assign]
        one_call(torch.compile(built.model, backend="eager"), built)
    except Unbuildable as exc:
        return outcome("unbuildable", str(exc))
    except _Alarm:
        return outcome("timeout", f"over {timeout} s in the {stage} stage")
    except Exception as exc:  # noqa: BLE001 - the model's failure is its outcome
        text = str(exc).strip().splitlines()
        return outcome(f"fails-{stage}" if stage != "build" else "unbuildable",
                       f"{type(exc).__name__}: {text[0] if text else ''}")
    finally:
        signal.alarm(0)
        InstructionTranslatorBase.log_graph_break = original  # type: ignore[method-assign]
        torch._dynamo.reset()
    total = sum(reasons.values())
    return outcome("breaks" if total else "clean", "; ".join(sorted(reasons)[:5]), total, len(reasons))


def _where(exc: object) -> str:
    """The break's user line, short: the file from its package on."""
    import torch

    stack = getattr(exc, "real_stack", None) or torch._guards.TracingContext.extract_stack()
    if not stack:
        return "?"
    filename = stack[-1].filename
    return f"{filename.split('site-packages/')[-1]}:{stack[-1].lineno}"


def worker(specs: list[str], timeout: int) -> None:
    signal.signal(signal.SIGALRM, _on_alarm)
    import torch

    torch.set_num_threads(1)
    for spec in specs:
        print(json.dumps({"start": spec}), flush=True)
        print(json.dumps(asdict(survey_one(spec, timeout))), flush=True)


# ---- the parent: workers fed from one queue, replaced when they die ------------------------------------------


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
            "TRANSFORMERS_VERBOSITY": "error", "PYTHONWARNINGS": "ignore"}


def _pump(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
    """A worker's output lines into ``lines``, then None when it closes."""
    for line in proc.stdout or ():
        lines.put(line)
    lines.put(None)


def drive(todo: queue.Queue[str], timeout: int, results: list[Outcome], lock: threading.Lock) -> None:
    """Run workers of up to 25 models each until the queue is empty; a worker silent past the timeout is killed."""
    from derive import half_of

    while True:
        batch: list[str] = []
        while len(batch) < 25:
            try:
                batch.append(todo.get_nowait())
            except queue.Empty:
                break
        if not batch:
            return
        proc = subprocess.Popen([sys.executable, str(HERE / "survey.py"), "--worker", "--timeout", str(timeout),
                                 "--only", ",".join(batch)], cwd=HERE, env=_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(proc, lines), daemon=True).start()
        current, done = None, set()
        while True:
            try:
                line = lines.get(timeout=timeout + 60)
            except queue.Empty:
                proc.kill()
                line = None
                status = "timeout"
            else:
                status = "crashed"
            if line is None:
                if current is not None and current not in done:
                    name = current.partition(":")[2]
                    with lock:
                        results.append(Outcome(current, half_of(name), status, "the worker died or hung"))
                    done.add(current)
                for spec in batch:
                    if spec not in done and spec != current:
                        todo.put(spec)
                proc.wait()
                break
            record = json.loads(line)
            if "start" in record:
                current = record["start"]
                continue
            outcome = Outcome(**record)
            done.add(outcome.spec)
            with lock:
                results.append(outcome)
            print(f"{len(results):4d} {outcome.spec}: {outcome.status} {outcome.breaks or ''} {outcome.reason[:90]}",
                  file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--libraries", default="transformers,diffusers")
    parser.add_argument("--only", default=None, help="comma-separated specs (library:Class) instead of all")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=180, help="seconds per model")
    parser.add_argument("--out", type=Path, default=HERE / "survey.json")
    parser.add_argument("--rerun", default=None, metavar="STATUS,...",
                        help="run again the models of --out with these statuses (after a change to the derivation) "
                             "and merge: the other models keep their recorded outcome")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    specs = args.only.split(",") if args.only else all_specs(args.libraries.split(","))
    kept: list[Outcome] = []
    if args.rerun:
        recorded = [Outcome(**m) for m in json.loads(args.out.read_text())["models"]]
        statuses = set(args.rerun.split(","))
        specs = [o.spec for o in recorded if o.status in statuses]
        kept = [o for o in recorded if o.status not in statuses]
    if args.worker:
        worker(specs, args.timeout)
        return
    todo: queue.Queue[str] = queue.Queue()
    for spec in specs:
        todo.put(spec)
    results: list[Outcome] = []
    lock = threading.Lock()
    started = time.perf_counter()
    threads = [threading.Thread(target=drive, args=(todo, args.timeout, results, lock)) for _ in range(args.workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    write(args.out, sorted(kept + results, key=lambda o: o.spec), time.perf_counter() - started)


def write(path: Path, results: list[Outcome], seconds: float) -> None:
    import diffusers
    import torch
    import transformers

    doc = {"schema": SCHEMA, "torch": torch.__version__, "transformers": transformers.__version__,
           "diffusers": diffusers.__version__, "seconds": round(seconds), "models": [asdict(o) for o in results]}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    counts: dict[str, int] = {}
    for o in results:
        counts[o.status] = counts.get(o.status, 0) + 1
    print(f"{len(results)} models in {seconds:.0f} s: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    print(f"written: {path}")


if __name__ == "__main__":
    main()
