"""What `dynscope fix` does to real Hugging Face models: break occurrences and distinct break sites before → after,
outputs equal, steady-state time per call before → after, and fix's wall time against one plain run.

Each program of bench/hf_models/ (a transformers model built from a tiny config, no download) runs once plainly
(timed) and once under `dynscope fix --profile` with a per-model budget; the table compares fix's baseline run with
its combined run of the verified remedies (source rewrites from the catalogue, settings, wrappers). "After" counts
only when the combined run was verified (verdict fixed or improved, outputs equal); otherwise it equals "before".
Steady state is `explain --profile`'s per-call time of the compiled model over the calls that did not compile.

    python bench/hf_rewrites.py [--models reformer,mra,...] [--budget 420] [--jobs 1] [--calls 10] [--out DIR]
    python bench/hf_rewrites.py --table A/results.json B/results.json   # the table of recorded runs again
                                                                         # (a model in several: the last one's row)
    python bench/hf_rewrites.py --strict-from A --models ... --out B     # judge a recorded run's rewrites alone
    python bench/hf_rewrites.py --generated bench/generated/survey.json --half untuned   # the generated bench's half
                                                                         # (bench/generated/README.md), never tuned on

"Rewrites only" (on by default; --no-strict skips it): for each model whose verified combined run holds source
rewrites, the source part of that combined patch (its diffs, no setting, no wrapper) is given back to
`dynscope fix --patch` with --jobs 1, the judge: its own baseline against the patched run, breaks, outputs equal,
steady-state time. Its win (fixed or improved, outputs equal) is what "removed by verified rewrites alone" counts.

Slow (tens of seconds per run, several runs per model): not part of the test suite. `--jobs 1` (the default)
keeps the runs of one model from sharing the cores, so their times compare.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MODELS_DIR = REPO / "bench" / "hf_models"
GENERATED_DIR = REPO / "bench" / "generated"
SCHEMA = "dynscope.hf-bench/1"


@dataclass(frozen=True)
class Site:
    """A distinct break left after fix (or before it, when nothing was verified)."""

    file: str  # shortened: from the package directory on ("transformers/models/...")
    line: int
    gb_type: str
    count: int


@dataclass(frozen=True)
class Strict:
    """The verified source rewrites alone: the source part of fix's combined patch (no setting, no wrapper)
    given back to `dynscope fix --patch` with --jobs 1 (the judge), its own baseline against the patched run."""

    status: str  # the judge's verdict ("fixed", "improved", "trade-off", "failed", ...), or "no rewrite"
    breaks_before: int
    breaks_after: int
    distinct_before: int
    distinct_after: int
    outputs_equal: bool | None  # None: no rewrite to judge
    steady_before_s: float | None
    steady_after_s: float | None
    left: tuple[Site, ...] = ()
    # with --strict-runs N > 1: every judge run's verdict and steady-time ratio, in order; the row is the median-ratio
    # run of the majority (won or not)
    verdicts: tuple[str, ...] = ()
    ratios: tuple[float | None, ...] = ()

    @property
    def ratio(self) -> float | None:
        if self.steady_before_s and self.steady_after_s is not None:
            return self.steady_after_s / self.steady_before_s
        return None

    @property
    def counted(self) -> bool:
        """Counts as removed by rewrites: the judge's verdict is a win with equal outputs."""
        return self.status in ("fixed", "improved") and self.outputs_equal is True

    @property
    def final_breaks(self) -> int:
        return self.breaks_after if self.counted else self.breaks_before


@dataclass(frozen=True)
class ModelResult:
    """One model's row."""

    model: str
    status: str  # "verified": the combined run was proven; else why the after-columns equal before
    breaks_before: int
    breaks_after: int
    distinct_before: int
    distinct_after: int
    outputs_equal: bool | None  # of the combined run; None: no combined run
    steady_before_s: float | None  # per call, calls that did not compile
    steady_after_s: float | None
    fix_wall_s: float
    plain_s: float | None
    runs: int  # fix's runs, the baseline included
    remedies: tuple[str, ...] = ()  # the combined run's remedy lines
    rules: tuple[str, ...] = ()  # catalogue rules among the verified rewrites
    settings: tuple[str, ...] = ()  # the combined run's other remedies (settings, wrappers): not source rewrites
    left: tuple[Site, ...] = field(default_factory=tuple)
    # "rewrites only": the combined run's source rewrites alone (its diff, no setting), judged by `fix --patch`
    strict: Strict | None = None
    # break occurrences of the problems the verified combined change's remedies served, by kind (``attribute``):
    # general catalogue rules, `library-port` (exact-fingerprint ports of one library function), settings and wrappers
    # (None: a row recorded before the split, which its results.json does not hold)
    by_rules: int | None = None
    by_ports: int | None = None
    by_settings: int | None = None
    ports: tuple[str, ...] = ()  # the library ports among the verified rewrites (their remedy titles)
    mode: str = "eval"  # the program's mode: "eval", or "train" (model.train(), a backward step per call)
    half: str = ""  # a generated program's half of the bench ("tuned", "untuned"; bench/generated/derive.py)

    @property
    def fix_goal_s(self) -> float | None:
        """The issue's bound on fix's wall time: (1 + trials ÷ 2) × one plain run."""
        return None if self.plain_s is None else (1 + (self.runs - 1) / 2) * self.plain_s


def short_path(path: str) -> str:
    """A file path from its site-packages entry on (``transformers/models/x.py``), else as given."""
    marker = "site-packages/"
    return path.split(marker, 1)[1] if marker in path else path


def steady_per_call(summary: dict[str, Any]) -> float | None:
    """The compiled entries' steady per-call time in a profiled summary (calls that did not compile)."""
    runtime = summary.get("runtime") or {}
    entries = runtime.get("entries") or []
    calls = sum(e.get("calls", 0) - e.get("compiling_calls", 0) for e in entries)
    steady = sum(e.get("steady_s") or 0.0 for e in entries)
    return steady / calls if calls > 0 else None


def sites_of(summary: dict[str, Any]) -> tuple[Site, ...]:
    return tuple(Site(short_path(b["file"] or "?"), int(b["line"] or 0), b.get("gb_type") or b["headline"], int(b["count"]))
                 for b in summary.get("graph_breaks", []))


def result_of(model: str, fix: dict[str, Any], before: dict[str, Any], after: dict[str, Any] | None,
              plain_s: float | None) -> ModelResult:
    """One row from fix's JSON and the summaries (``summary --json``) of its baseline and combined captures."""
    combined = fix.get("combined")
    verified = (combined is not None and combined.get("verdict") in ("fixed", "improved")
                and combined.get("correct") is True and after is not None)
    if combined is None:
        status = "nothing verified"
    elif not verified:
        status = f"combined {combined.get('verdict')}" + ("" if combined.get("correct") is not False else ", outputs differ")
    else:
        status = f"verified ({combined.get('verdict')})"
    final = after if verified and after is not None else before
    trials = fix.get("trials", [])
    remedies = tuple(combined.get("remedies", [])) if combined else ()
    rules = sorted({t["rewrite"]["rule"] for t in trials
                    if t.get("rewrite") and t.get("remedy") in remedies and t.get("verdict") in ("fixed", "improved")})
    rewritten = {t.get("remedy") for t in trials if t.get("rewrite")}
    settings = tuple(dict.fromkeys(r for r in remedies if r not in rewritten))
    by = capped(attribute(fix), before["totals"]["graph_breaks"] - final["totals"]["graph_breaks"]) if verified \
        else {"rules": 0, "ports": 0, "settings": 0}
    ports = tuple(dict.fromkeys(t["remedy"] for t in trials if verified and kind_of(t) == "ports"
                                and t.get("remedy") in remedies and t.get("verdict") in ("fixed", "improved")))
    return ModelResult(
        model=model, status=status, by_rules=by["rules"], by_ports=by["ports"], by_settings=by["settings"], ports=ports,
        breaks_before=before["totals"]["graph_breaks"], breaks_after=final["totals"]["graph_breaks"],
        distinct_before=before["totals"]["distinct_graph_breaks"], distinct_after=final["totals"]["distinct_graph_breaks"],
        outputs_equal=None if combined is None else combined.get("correct"),
        steady_before_s=steady_per_call(before), steady_after_s=steady_per_call(final),
        fix_wall_s=float(fix["wall_s"]), plain_s=plain_s, runs=int(fix["runs"]),
        remedies=remedies, rules=tuple(rules), settings=settings if verified else (), left=sites_of(final))


PORT_RULE = "library-port"  # dynscope/rewrites/library_ports.py: fires only on the exact function it was written for


def kind_of(trial: dict[str, Any]) -> str:
    """A trial row's kind: "ports" (a `library-port` rewrite), "rules" (a general catalogue rule), "settings"."""
    rule = (trial.get("rewrite") or {}).get("rule")
    return "settings" if rule is None else "ports" if rule == PORT_RULE else "rules"


def attribute(fix: dict[str, Any]) -> dict[str, int]:
    """Break occurrences removed, by the kind of the verified remedy that served them: each problem of a remedy in the
    combined change counted once, for the first such remedy in the combined change's order; a fixed row's problems
    with their baseline count, an improved row's with what its own run removed (at most their count)."""
    combined = fix.get("combined") or {}
    chosen = list(combined.get("remedies") or ())
    rows = sorted((t for t in fix.get("trials", []) if t.get("remedy") in chosen and t.get("verdict") in ("fixed", "improved")
                   and t.get("correct") is True), key=lambda t: chosen.index(t["remedy"]))
    seen: set[tuple[Any, ...]] = set()
    out = {"rules": 0, "ports": 0, "settings": 0}
    for t in rows:
        gone = (t.get("before") or {}).get("count") or 0
        if t["verdict"] == "improved":
            gone -= (t.get("after") or {}).get("count") or 0
        for p in t.get("problems") or [t["problem"]]:
            key = (p.get("kind"), p.get("file"), p.get("line"), p.get("detail"))
            if p.get("kind") != "break" or key in seen:
                continue
            seen.add(key)
            n = min(int(p.get("count") or 0), max(0, gone))
            gone -= n
            out[kind_of(t)] += n
    return out


def capped(by: dict[str, int], removed: int) -> dict[str, int]:
    """The attribution held to what the combined run removed in all (new breaks elsewhere, a remedy's own call
    breaking, make the served problems' counts add up to more): the ports' part first, then the general rules',
    then the settings' (so the general rules are never counted for what a port may have done)."""
    left = max(0, removed)
    out = {}
    for kind in ("ports", "rules", "settings"):
        out[kind] = min(by[kind], left)
        left -= out[kind]
    return out


def source_part(patch: str) -> str:
    """The unified diffs of fix's combined patch: its config lines (settings, wrappers: they come first) left out."""
    lines = patch.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            return "".join(lines[i:])
    return ""


def strict_of(judge: dict[str, Any], before: dict[str, Any], after: dict[str, Any] | None) -> Strict:
    """The rewrites-only row from the judge's JSON (`fix --patch`) and the summaries of its baseline and patched run."""
    trial = judge["trials"][0]
    counted = trial.get("verdict") in ("fixed", "improved") and trial.get("correct") is True and after is not None
    final = after if after is not None else before
    return Strict(status=str(trial.get("verdict")),
                  breaks_before=before["totals"]["graph_breaks"], breaks_after=final["totals"]["graph_breaks"],
                  distinct_before=before["totals"]["distinct_graph_breaks"],
                  distinct_after=final["totals"]["distinct_graph_breaks"],
                  outputs_equal=trial.get("correct"), steady_before_s=steady_per_call(before),
                  steady_after_s=steady_per_call(final), left=sites_of(final if counted else before))


def no_rewrite(row: ModelResult) -> Strict:
    """A model whose verified combined run holds no source rewrite: nothing removed by rewrites."""
    return Strict("no rewrite", row.breaks_before, row.breaks_before, row.distinct_before, row.distinct_before,
                  None, None, None, ())  # nothing judged, nothing timed


def majority(runs: list[Strict]) -> Strict:
    """Several judge runs of one patch as one row: the majority's outcome (won, or not; a tie is not won), shown by
    its median-ratio run, with every run's verdict and ratio. On a loaded machine one run's time verdict can flip."""
    if len(runs) == 1:
        return runs[0]
    won = [r for r in runs if r.counted]
    side = won if 2 * len(won) > len(runs) else [r for r in runs if not r.counted]
    by_ratio = sorted(side, key=lambda r: float("inf") if r.ratio is None else r.ratio)
    return replace(by_ratio[(len(by_ratio) - 1) // 2], verdicts=tuple(r.status for r in runs),
                   ratios=tuple(r.ratio for r in runs))


def judge_rewrites(model: str, fix: dict[str, Any], row: ModelResult, args: argparse.Namespace, out: Path,
                   program: list[str] | None = None) -> Strict:
    """`dynscope fix --patch` on the source part of the verified combined change, alone, --jobs 1 (--strict-runs times)."""
    combined = fix.get("combined") or {}
    diff = source_part(combined.get("patch") or "") if row.status.startswith("verified") else ""
    if not diff:
        return no_rewrite(row)
    patch = out / f"{model}.rewrites.diff"
    patch.write_text(diff)
    if program is None:
        script = model.removesuffix("-train")
        program = [str(MODELS_DIR / f"{script}.py"), "--backend", args.backend, "--calls", str(args.calls),
                   *(["--train"] if row.mode == "train" else [])]
    runs = []
    for run in range(1, args.strict_runs + 1):
        tag = "" if args.strict_runs == 1 else f"-{run}"
        judge_json = out / f"{model}.strict{tag}.json"
        subprocess.run([sys.executable, "-m", "dynscope", "fix", "--profile", "--budget", str(args.budget), "--jobs", "1",
                        "--patch", str(patch), "--out", str(out / f"{model}-strict{tag}"), "-o", str(judge_json), *program],
                       cwd=out, env=_env(), stdout=subprocess.DEVNULL, stderr=(out / f"{model}.strict{tag}.err").open("w"),
                       timeout=args.budget + 300)
        judge = json.loads(judge_json.read_text())
        trial = judge["trials"][0]
        before = _summary(judge["baseline"]["capture"])
        after = _summary(trial["capture"]) if trial.get("capture") and trial.get("after") is not None else None
        runs.append(strict_of(judge, before, after))
    return majority(runs)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.2f}"


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}"


def _ratio(after: float | None, before: float | None) -> str:
    return "-" if after is None or before is None or before <= 0 else f"{after / before:.2f}"


def _settings(r: ModelResult) -> str:
    return f" + {len(r.settings)} setting{'s' if len(r.settings) > 1 else ''}" if r.settings else ""


def _split(r: ModelResult) -> str:
    if r.by_ports is None:
        return "rules/ports not split"
    return f"rules {r.by_rules} · ports {r.by_ports} · settings {r.by_settings}"


def _ports(r: ModelResult) -> str:
    return f" + {len(r.ports)} library port{'s' if len(r.ports) > 1 else ''}" if r.ports else ""


def _share(n: int, total: int) -> str:
    return f"{n} ({100.0 * n / total:.1f}%)" if total else str(n)


def split_strict(r: ModelResult) -> tuple[int, int]:
    """(general rules, library ports) of what the rewrites alone removed: the ports' part first, at most what the
    problems the ports served counted (``attribute``), the rest to the general rules (never more than they served
    either: what neither served, removed by tracing on, goes to the rules only up to their own)."""
    st = r.strict
    if st is None or not st.counted:
        return 0, 0
    removed = max(0, st.breaks_before - st.final_breaks)
    if r.by_ports is None:
        return 0, 0  # recorded before the split: neither (format_strict names them)
    ports = min(r.by_ports, removed)
    return removed - ports, ports


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def format_table(results: list[ModelResult]) -> str:
    """The table, a totals line with the share of break occurrences removed, and the sites left."""
    head = (f"{'model':20} {'breaks':>9} {'distinct':>8} {'equal':>5} {'ms/call':>15} {'x':>5} "
            f"{'fix s':>6} {'plain s':>7} {'goal s':>6}  status; rules")
    lines = [head, "-" * len(head)]
    for r in results:
        equal = {True: "yes", False: "NO", None: "-"}[r.outputs_equal]
        goal = r.fix_goal_s
        lines.append(
            f"{r.model:20} {f'{r.breaks_before}→{r.breaks_after}':>9} {f'{r.distinct_before}→{r.distinct_after}':>8} "
            f"{equal:>5} {f'{_ms(r.steady_before_s)}→{_ms(r.steady_after_s)}':>15} "
            f"{_ratio(r.steady_after_s, r.steady_before_s):>5} {r.fix_wall_s:6.0f} "
            f"{'-' if r.plain_s is None else f'{r.plain_s:.0f}':>7} {'-' if goal is None else f'{goal:.0f}':>6}  "
            f"{r.status}; {_split(r)}; "
            f"{', '.join(r.rules) or '-'}{_ports(r)}{_settings(r)}")
    before = sum(r.breaks_before for r in results)
    after = sum(r.breaks_after for r in results)
    d_before = sum(r.distinct_before for r in results)
    d_after = sum(r.distinct_after for r in results)
    removed = 100.0 * (before - after) / before if before else 0.0
    equal_all = sum(1 for r in results if r.outputs_equal is True)
    slower = sum(1 for r in results if r.steady_before_s and r.steady_after_s and r.steady_after_s > r.steady_before_s)
    lines.append("-" * len(head))
    lines.append(f"{'total':20} {f'{before}→{after}':>9} {f'{d_before}→{d_after}':>8}   occurrences removed: "
                 f"{before - after} of {before} ({removed:.0f}%); outputs equal on {equal_all} of {len(results)} "
                 f"combined runs; slower steady state on {slower}")
    unsplit = [r.model for r in results if r.by_ports is None]
    lines.append(f"{'':20} removed, by the kind of the verified remedy that served them: general rules "
                 f"{_share(sum(r.by_rules or 0 for r in results), before)}, library ports "
                 f"{_share(sum(r.by_ports or 0 for r in results), before)}, settings and wrappers "
                 f"{_share(sum(r.by_settings or 0 for r in results), before)}"
                 + (f"; not split (recorded before the split): {', '.join(unsplit)}" if unsplit else ""))
    judged = [r for r in results if r.strict is not None]
    if judged:
        lines.append("")
        lines.extend(format_strict(judged, before))
    settings = [(r.model, s) for r in results for s in r.settings]
    if settings:
        lines.append("")
        lines.append("settings and wrappers in the verified combined runs (not source rewrites):")
        lines.extend(f"  {m:20} {s}" for m, s in settings)
    left = [(r.model, s) for r in results for s in r.left]
    if left:
        lines.append("")
        lines.append("sites left (model, file:line, torch's gb_type, occurrences):")
        lines.extend(f"  {m:20} {s.file}:{s.line}  [{_clip(s.gb_type, 70)}]  ×{s.count}" for m, s in left)
    return "\n".join(lines)


def format_strict(results: list[ModelResult], total_before: int) -> list[str]:
    """The rewrites-only table: each model's verified source rewrites alone, judged by `fix --patch` (--jobs 1)."""
    head = (f"{'rewrites only':20} {'breaks':>9} {'distinct':>8} {'equal':>5} {'ms/call':>15} {'x':>5}  judge's verdict")
    lines = [head, "-" * len(head)]
    removed = 0
    for r in results:
        st = r.strict
        assert st is not None
        equal = {True: "yes", False: "NO", None: "-"}[st.outputs_equal]
        # the judge's own proof: its fresh baseline against the patched run
        gone = st.breaks_before - st.final_breaks
        removed += gone
        lines.append(f"{r.model:20} {f'{st.breaks_before}→{st.breaks_after}':>9} "
                     f"{f'{st.distinct_before}→{st.distinct_after}':>8} {equal:>5} "
                     f"{f'{_ms(st.steady_before_s)}→{_ms(st.steady_after_s)}':>15} "
                     f"{_ratio(st.steady_after_s, st.steady_before_s):>5}  {st.status}"
                     + ("" if st.counted or st.status == "no rewrite" else " (not counted)")
                     + (f"; runs: {', '.join(f'{v} {_x(x)}' for v, x in zip(st.verdicts, st.ratios))}" if st.verdicts else ""))
    rules = sum(split_strict(r)[0] for r in results)
    ports = sum(split_strict(r)[1] for r in results)
    share = 100.0 * removed / total_before if total_before else 0.0
    slower = [r.model for r in results if r.strict is not None and r.strict.counted and r.strict.steady_before_s
              and r.strict.steady_after_s and r.strict.steady_after_s > r.strict.steady_before_s]
    lines.append("-" * len(head))
    lines.append(f"removed by verified rewrites alone: {removed} of {total_before} ({share:.1f}%); slower steady state "
                 f"on {len(slower)} of {sum(1 for r in results if r.strict is not None and r.strict.counted)} counted"
                 + (f" ({', '.join(slower)})" if slower else ""))
    unsplit = [r.model for r in results if r.by_ports is None and r.strict is not None and r.strict.counted]
    lines.append(f"  of which by general rules {_share(rules, total_before)}, by library ports {_share(ports, total_before)} "
                 "(the ports' part: at most the occurrences of the problems the ports' rows served)"
                 + (f"; not split, in neither (recorded before the split): {', '.join(unsplit)}"
                    if unsplit else ""))
    return lines


def load_results(path: Path) -> list[ModelResult]:
    doc = json.loads(path.read_text())
    if doc.get("schema") != SCHEMA:
        raise SystemExit(f"{path}: not a {SCHEMA} file")
    out = []
    for row in doc["models"]:
        row = dict(row)
        row["remedies"] = tuple(row.get("remedies", ()))
        row["rules"] = tuple(row.get("rules", ()))
        row["settings"] = tuple(row.get("settings", ()))
        row["ports"] = tuple(row.get("ports", ()))
        row["left"] = tuple(Site(**s) for s in row.get("left", ()))
        strict = row.get("strict")
        if strict is not None:
            strict = dict(strict)
            strict["left"] = tuple(Site(**s) for s in strict.get("left", ()))
            strict["verdicts"] = tuple(strict.get("verdicts", ()))
            strict["ratios"] = tuple(strict.get("ratios", ()))
            row["strict"] = Strict(**strict)
        out.append(ModelResult(**row))
    return out


def save_results(path: Path, results: list[ModelResult], meta: dict[str, Any]) -> None:
    path.write_text(json.dumps({"schema": SCHEMA, **meta, "models": [asdict(r) for r in results]}, indent=1) + "\n")


def _summary(capture: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "dynscope", "summary", "--json", capture], check=True,
                         capture_output=True, text=True)
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


THREADS = 1  # --threads: torch's intra-op threads in every run of the bench


def _env() -> dict[str, str]:
    # OpenMP's threads wait for each other at every parallel op: on a shared, loaded machine a 2-thread run measures
    # the load (BigBird-Pegasus: 450-500 ms a call at load 6 with 2 threads, 3-9 ms with 1, the same code)
    threads = str(THREADS)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads}


def trains(model: str) -> bool:
    """The program takes --train (model.train(), a backward step per call): every model a library port fires on."""
    return ":" not in model and "--train" in (MODELS_DIR / f"{model}.py").read_text()


def program_of(model: str, args: argparse.Namespace, mode: str) -> list[str]:
    """The command line of a model's program: a written one of bench/hf_models/, or a generated one (library:Class,
    bench/generated/program.py: eval forwards at two sizes and a training step per call, so no mode)."""
    if ":" in model:
        return [str(GENERATED_DIR / "program.py"), model, "--backend", args.backend, "--calls", str(args.calls)]
    return [str(MODELS_DIR / f"{model}.py"), "--backend", args.backend, "--calls", str(args.calls),
            *(["--train"] if mode == "train" else [])]


def run_model(model: str, args: argparse.Namespace, out: Path, mode: str = "eval") -> ModelResult:
    program = program_of(model, args, mode)
    name = model.partition(":")[2] or (model if mode == "eval" else f"{model}-{mode}")
    plain_s: float | None = None
    if not args.no_plain:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            subprocess.run([sys.executable, *program], check=True, cwd=tmp, env=_env(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=args.budget)
            plain_s = time.perf_counter() - started
    fix_json = out / f"{name}.fix.json"
    subprocess.run([sys.executable, "-m", "dynscope", "fix", "--profile", "--budget", str(args.budget),
                    "--jobs", str(args.jobs), "--out", str(out / f"{name}-fix"), "-o", str(fix_json), *program],
                   cwd=out, env=_env(), stdout=subprocess.DEVNULL, stderr=(out / f"{name}.fix.err").open("w"),
                   timeout=args.budget + 300)
    fix = json.loads(fix_json.read_text())
    before = _summary(fix["baseline"]["capture"])
    combined = fix.get("combined") or {}
    after = _summary(combined["capture"]) if combined.get("capture") else None
    row = replace(result_of(name, fix, before, after, plain_s), mode=mode, half=half_of(model))
    return replace(row, strict=judge_rewrites(name, fix, row, args, out, program)) if args.strict else row


def half_of(model: str) -> str:
    """A generated program's half of the bench (the fixed hash of its class name); "" for a written program."""
    if ":" not in model:
        return ""
    sys.path.insert(0, str(GENERATED_DIR))
    from derive import half_of as generated_half

    return generated_half(model.partition(":")[2])


def generated_models(survey: Path, half: str) -> list[str]:
    """The models of a survey (bench/generated/survey.py) that break, in the chosen half ("both": all)."""
    doc = json.loads(survey.read_text())
    return [m["spec"] for m in doc["models"] if m["status"] == "breaks" and half in ("both", m["half"])]


def format_halves(results: list[ModelResult]) -> str:
    """The table per half of the generated bench (written programs, without a half, first if any)."""
    return "\n\n".join(f"== {half or 'written programs'} ==\n{format_table([r for r in results if r.half == half])}"
                        for half in ("", "tuned", "untuned") if any(r.half == half for r in results))


def row_name(model: str) -> str:
    """The name a model's row and files go under: the class of a generated program's ``library:Class``, else as named."""
    return model.partition(":")[2] or model


def rejudge(model: str, recorded: Path, row: ModelResult, args: argparse.Namespace, out: Path) -> ModelResult:
    """A recorded run's row with the rewrites-only judge added (its fix JSON read from the recorded run's directory).
    ``model``: as --models names it (a generated program's ``library:Class``; its row is under the class name)."""
    name = row_name(model)
    fix = json.loads((recorded / f"{name}.fix.json").read_text())
    program = program_of(model, args, row.mode) if ":" in model else None
    return replace(row, strict=judge_rewrites(name, fix, row, args, out, program))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    models = sorted(p.stem for p in MODELS_DIR.glob("*.py"))
    parser.add_argument("--models", default=",".join(models), help="comma-separated names from bench/hf_models/")
    parser.add_argument("--budget", type=float, default=420.0, help="fix's --budget per model, seconds")
    parser.add_argument("--jobs", type=int, default=1, help="fix's --jobs (1: run times compare)")
    parser.add_argument("--calls", type=int, default=10, help="compiled calls per run (steady state: those that do not compile)")
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--mode", choices=("eval", "train", "both"), default="eval",
                        help="the programs' mode: train (model.train(), a backward step per call; only the programs that "
                             "take --train: those a library port fires on), or both: every library port proven in each")
    parser.add_argument("--generated", type=Path, default=None, metavar="SURVEY",
                        help="the models of a generated-bench survey that break (bench/generated/survey.json) instead "
                             "of --models")
    parser.add_argument("--half", choices=("tuned", "untuned", "both"), default="both",
                        help="with --generated: which half of the bench")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain timed run (no fix-time goal)")
    parser.add_argument("--out", type=Path, default=None, help="where fix's runs and results.json go (default: a new temp dir)")
    parser.add_argument("--no-strict", dest="strict", action="store_false",
                        help="skip the rewrites-only judge (fix --patch on the verified source rewrites alone)")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="OMP_NUM_THREADS for every run (default 1: with more, a loaded machine's OpenMP waits "
                             "swamp the models' times)")
    parser.add_argument("--strict-runs", type=int, default=1, metavar="N",
                        help="judge the rewrites alone N times and count the majority (a loaded machine flips time verdicts)")
    parser.add_argument("--strict-from", type=Path, default=None, metavar="DIR",
                        help="judge the rewrites alone for a recorded run's models (DIR: its --out, with results.json and "
                             "the fix JSONs), without running fix again")
    parser.add_argument("--table", type=Path, nargs="+", default=None,
                        help="print the table of recorded results.json files and stop (a model in several: the last row)")
    parser.add_argument("--save", type=Path, default=None, metavar="PATH",
                        help="with --table: also write the merged rows as one results.json")
    args = parser.parse_args()
    global THREADS
    THREADS = args.threads
    if args.table is not None:
        rows: dict[str, ModelResult] = {}
        sources = []
        for path in args.table:
            rows.update((r.model, r) for r in load_results(path))
            sources.append(str(path))
        merged = sorted(rows.values(), key=lambda r: r.model)
        print(format_halves(merged))
        if args.save is not None:
            save_results(args.save, merged, {"merged_from": sources})
        return
    if args.generated is not None:
        args.models = ",".join(generated_models(args.generated, args.half))
    unknown = [m for m in args.models.split(",") if m not in models and ":" not in m]
    if unknown:
        raise SystemExit(f"unknown model(s): {', '.join(unknown)} (known: {', '.join(models)})")
    out = args.out or Path(tempfile.mkdtemp(prefix="hf-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    results: list[ModelResult] = []
    meta: dict[str, Any] = {"budget_s": args.budget, "jobs": args.jobs, "calls": args.calls, "backend": args.backend,
                            "threads": args.threads}
    recorded: dict[str, ModelResult] = {}
    if args.strict_from is not None:
        recorded = {r.model: r for r in load_results(args.strict_from / "results.json")}
        meta = {**json.loads((args.strict_from / "results.json").read_text()), "strict_jobs": 1,
                "strict_threads": args.threads, "strict_runs": args.strict_runs}
        meta = {k: v for k, v in meta.items() if k not in ("schema", "models")}
    for model in args.models.split(","):
        started = time.perf_counter()
        try:
            if args.strict_from is not None:
                if row_name(model) not in recorded:
                    continue
                results.append(rejudge(model, args.strict_from, recorded[row_name(model)], args, out))
            else:
                modes = ("eval", "train") if args.mode == "both" else (args.mode,)
                results.extend(run_model(model, args, out, mode) for mode in modes if mode == "eval" or trains(model))
        except (subprocess.SubprocessError, OSError, KeyError, json.JSONDecodeError) as exc:
            print(f"{model}: failed after {time.perf_counter() - started:.0f} s: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
            continue
        save_results(out / "results.json", results, meta)
        print(f"{model}: done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    print(format_halves(results))
    print(f"\nresults: {out / 'results.json'}")


if __name__ == "__main__":
    main()
