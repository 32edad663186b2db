"""A self-contained HTML report: one file, no network, everything from the capture escaped.

Server side we render the page (jinja2, autoescape on) and, for each compile shown in detail,
a JSON payload of its stages, diffs, graphs and kernels, gzipped and base64-encoded into the
page; the page's script decompresses a compile's payload only when it is opened, and puts
every string into the DOM as text. Graph drawings are SVG images (data: URLs), which cannot
run scripts. A Content-Security-Policy with a per-report nonce backs this up: no request
leaves the page, and no script but ours runs.
"""

from __future__ import annotations

import base64
import gzip
import secrets
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from dynscope.analysis.alerts import clean_line
from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.changes import comparison_lines
from dynscope.analysis.compile_time import phase_label
from dynscope.analysis.diff import diff_compiles, diff_stages, previous_recorded
from dynscope.analysis.dot import render_svg, stage_to_dot
from dynscope.analysis.names import ATTEMPTS_MEANING, attempts_note, command_line, friendly_function, location, seconds_text, short_path
from dynscope.analysis.overview import compile_seconds, not_understood_line
from dynscope.analysis.problems import (
    CompileErrorProblem,
    GraphBreakProblem,
    Problem,
    RecompileLimitProblem,
    RecompileProblem,
    SkippedFrameProblem,
    advice_for,
)
from dynscope.analysis.ranks import rank_differences
from dynscope.analysis.run_view import RunView, run_view
from dynscope.analysis.runtime import cudagraph_line
from dynscope.analysis.source import SourceAccess
from dynscope.analysis.summary import break_json, compile_json, error_json, kernel_json, recompile_json, stage_json
from dynscope.errors import DynscopeError
from dynscope.exhaustive import assert_never
from dynscope.model import Capture, Compile, Recompile, Stage
from dynscope.model.compile_phases import PhaseName
from dynscope.reporters import ReportOptions
from dynscope.reporters.numerics_plot import plots as numerics_plots
from dynscope.safe_text import doc_url, json_text, visible, visible_strings

if TYPE_CHECKING:
    import jinja2

_HERE = Path(__file__).parent
_PHASE_COLORS: dict[PhaseName, str] = {
    "dynamo": "#4c6ef5", "guards": "#748ffc", "aot": "#12b886", "inductor": "#fab005", "lowering": "#f59f00",
    "scheduling": "#f08c00", "codegen": "#fa5252", "compile": "#e03131", "autotune": "#c2255c", "backward": "#be4bdb",
    "other": "#adb5bd"}
_FLAME_INDUCTOR_START: frozenset[PhaseName] = frozenset({"inductor", "lowering", "scheduling", "codegen", "compile",
                                                         "autotune", "backward"})
_STAGE_COLORS = {"dynamo": "#4c6ef5", "aot_autograd": "#12b886", "inductor": "#fab005", "codegen": "#fa5252",
                 "backward": "#be4bdb"}


@dataclass(frozen=True)
class ReportLimits:
    """What keeps a report of a huge capture usable; everything cut is said in the report."""

    detailed_compiles: int = 100  # compiles with a stage stepper (the most interesting first)
    stage_bytes: int = 200_000  # per stage text
    payload_bytes: int = 60_000_000  # all detailed payloads together, before compression
    graphs: int = 40  # graphviz drawings
    graph_nodes: int = 400  # bigger graphs are drawn collapsed
    recompile_diffs: int = 50
    timeline_frames: int = 200


def _visible_value(value: Any) -> Any:
    """The templates' finalize: every string a template shows made visible, markup too (a
    ``join`` of capture strings is markup; escapes add no HTML syntax, so it stays safe)."""
    import markupsafe

    if isinstance(value, markupsafe.Markup):
        return markupsafe.Markup(visible(str(value)))
    if isinstance(value, str):
        return visible(value)
    return value


class HtmlReporter:
    """The report's data is prepared once (every rank's run view, stages, diffs, drawings); the
    template renders it."""

    def __init__(self, context: dict[str, Any]) -> None:
        self.context = context

    @classmethod
    def prepare(cls, captures: Sequence[Capture], options: ReportOptions = ReportOptions(), *,
                limits: ReportLimits = ReportLimits()) -> HtmlReporter:
        started = time.perf_counter()
        graphs = _GraphBudget(limits.graphs)
        ranks = [_RankView(i, capture, limits, graphs,
                           SourceAccess.for_run(capture.run, source_roots=options.source_roots,
                                                any_source=options.any_source)).build()
                 for i, capture in enumerate(captures)]
        comparison = options.comparison
        return cls({
            "title": _title(captures),
            "ranks": ranks,
            "differences": rank_differences(list(captures)) if len(captures) > 1 else None,
            # the lines of dynscope.analysis.changes against another run, shown first
            "comparison": None if comparison is None else [comparison.before.run.path, *comparison_lines(comparison)],
            "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
            "generation_s": time.perf_counter() - started,
            "graph_note": graphs.note(),
        })

    def render(self, out: TextIO) -> None:
        env = template_environment()
        out.write(env.get_template("report.html.j2").render(
            **self.context,
            css=(_HERE / "assets" / "report.css").read_text(),
            js=(_HERE / "assets" / "report.js").read_text(),
            nonce=secrets.token_urlsafe(16),
        ))


def template_environment() -> jinja2.Environment:
    """The one Jinja environment of dynscope's HTML (the report, the notebook view): autoescaped,
    and every value a template shows is a capture's text, shown with its control characters visible."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_visible_value,
    )
    env.filters["seconds"] = lambda v: "–" if not v else f"{v:.2f}"
    return env


def _title(captures: Sequence[Capture]) -> str:
    command = captures[0].run.command
    script = next((a for a in command if a.endswith(".py")), None) or " ".join(command[:4]) or "run"
    return f"torch.compile report: {short_path(script)}"


class _GraphBudget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.drawn = 0
        self.skipped = 0
        self.unavailable = shutil.which("dot") is None

    def take(self) -> bool:
        if self.unavailable or self.drawn >= self.limit:
            self.skipped += 1
            return False
        self.drawn += 1
        return True

    def note(self) -> str | None:
        if self.unavailable:
            return "graphviz's `dot` was not installed when this report was made: graphs are shown as DOT text."
        if self.skipped:
            return f"{self.drawn} graphs are drawn; {self.skipped} more are shown as DOT text (drawing budget)."
        return None


class _RankView:
    def __init__(self, index: int, capture: Capture, limits: ReportLimits, graphs: _GraphBudget,
                 sources: SourceAccess) -> None:
        self.index = index
        self.sources = sources
        self.capture = capture
        self.limits = limits
        self.graphs = graphs
        self.cwd = capture.run.cwd
        self.payload_left = limits.payload_bytes

    def build(self) -> dict[str, Any]:
        capture, run = self.capture, self.capture.run
        view = run_view(capture)
        compiles, groups, recompiles = view.compiles, view.break_groups, view.recompiles
        detailed = self._detailed_ids(compiles, groups, recompiles)
        self._modes = self._compile_modes(view)
        return {
            "id": f"r{self.index}",
            "label": f"rank {run.rank}" if run.world_size and run.world_size > 1 else "run",
            "run": self._run_facts(),
            "counts": view.totals,
            "problems": [self._problem(p, groups, recompiles) for p in view.problems[:10]],
            "alerts": self._alerts(view),
            "clean": view.clean,
            "clean_line": clean_line(view.alerts),
            "runtime": self._runtime(view),
            "minify": view.minify_results,
            "numerics": self._numerics(view),
            "not_understood": not_understood_line(view.not_understood),
            "stage_totals": self._stage_totals(view.totals.time_by_phase),
            "timeline": self._timeline(compiles),
            "flame": self._compile_flame(view),
            "breaks": [self._break(i, g) for i, g in enumerate(groups)],
            "recompiles": [self._recompile(i, r) for i, r in enumerate(recompiles)],
            "errors": [
                {**error_json(e), "shown_function": friendly_function(e.function),
                 "where": location(e.file, e.line, self.cwd)}
                for e in view.errors
            ],
            "compiles": [self._compile(c, c.compile_id in detailed) for c in compiles],
            "attempts_meaning": ATTEMPTS_MEANING if any(c.attempts > 1 for c in compiles) else None,
            "detail_note": (f"{len(compiles) - len(detailed)} of {len(compiles)} compiles are listed without their "
                            f"stages to keep this report usable (those with breaks, recompiles and errors, then the "
                            f"slowest, are shown in full); `dynscope stages` and `dynscope show` read any of them."
                            if len(detailed) < len(compiles) else None),
        }

    def _alerts(self, view: RunView) -> list[dict[str, Any]]:
        """What is wrong beyond the compiles, each with its place (the overview leads with them)."""
        return [{"kind": a.kind, "title": a.title, "detail": a.detail,
                 "where": location(a.file, a.line, self.cwd) if a.file else None} for a in view.alerts]

    def _run_facts(self) -> dict[str, Any]:
        run = self.capture.run
        exception = self.capture.exception
        return {
            "torch": run.torch_version, "python": run.python, "dynscope": run.dynscope_version,
            "command": command_line(run.command), "cwd": run.cwd, "host": run.hostname,
            "device": run.device.get("cuda_device") or ("CUDA" if run.device.get("cuda") else "CPU"),
            "triton": run.device.get("triton"),
            "rank": run.rank, "world_size": run.world_size,
            "ended": run.outcome,
            "duration_s": run.duration_s,
            "keep_caches": run.keep_caches,
            "capture": run.path,
            "exception": None if exception is None else f"{exception.type}: {exception.message.strip()}",
            "missing_probes": sorted(name for name, ok in run.probes.items() if not ok),
            "probe_errors": run.probe_errors,
        }

    def _numerics(self, view: RunView) -> dict[str, Any] | None:
        """What `dynscope numerics` found, and the error along each graph as SVG geometry (None: not checked)."""
        n = view.numerics
        if n is None:
            return None
        first, problem = n.first_suspect, n.problem
        return {
            "verdict": n.verdict, "verdict_line": n.verdict_line, "criterion": n.criterion, "hints": list(n.hints),
            "nodes": len(n.numerics.nodes), "graphs": n.numerics.graphs_checked, "suspects": n.suspect_count,
            "nondeterministic": n.nondeterministic_count, "reference": n.numerics.reference_dtype or "higher-precision",
            "first": None if first is None or problem is None else {
                "node": first.node, "op": first.op, "graph": first.graph, "direction": first.direction,
                "index": first.index, "kernel": first.kernel, "function": problem.function,
                "where": location(problem.file, problem.line, self.cwd),
                "code": (first.stack[-1].code or "").strip() if first.stack else "",
                "compiled": f"{first.compiled_error:.3g}", "eager": f"{first.eager_error:.3g}",
            },
            "plots": numerics_plots(n),
        }

    def _stage_totals(self, parts: tuple[tuple[str, float], ...]) -> list[dict[str, Any]]:
        """The run's compile time by phase, named and coloured as the per-frame phases below."""
        colors = {phase_label(p): c for p, c in _PHASE_COLORS.items()}
        whole = sum(v for _, v in parts) or 1.0
        return [{"name": n, "seconds": v, "percent": 100 * v / whole,
                 "color": colors.get(n) or colors.get(n.split(" + ")[0], "#868e96")} for n, v in parts]

    def _problem(self, problem: Problem, groups: list[BreakGroup], recompiles: list[Recompile]) -> dict[str, Any]:
        """A ranked problem with a link to the section that explains it."""
        errors = f"r{self.index}-errors"
        match problem:
            case GraphBreakProblem(group=group):
                anchor = f"r{self.index}-break-{groups.index(group)}"
            case RecompileProblem(recompiles=frame_recompiles):
                anchor = f"r{self.index}-recompile-{recompiles.index(frame_recompiles[0])}"
            case RecompileLimitProblem(hit=hit):  # the recompile that hit it, when it was recorded as one
                limit = next((i for i, r in enumerate(recompiles) if r.compile_id == hit.compile_id), None)
                anchor = errors if limit is None else f"r{self.index}-recompile-{limit}"
            case SkippedFrameProblem():  # the graph break that made Dynamo give up on the frame
                skipped = set(problem.compile_ids)
                cause = next((i for i, g in enumerate(groups) if skipped & set(g.skipped_compile_ids)), None)
                anchor = errors if cause is None else f"r{self.index}-break-{cause}"
            case CompileErrorProblem():
                anchor = errors
            case _:
                assert_never(problem)
        loc = problem.location
        return {"kind": problem.kind.replace("_", " "), "title": problem.title, "explanation": problem.explanation,
                "hint": problem.hint, "count": problem.count, "anchor": anchor, "fixes": list(problem.fixes),
                "where": location(loc.file, loc.line, self.cwd),
                "cost": seconds_text(problem.cost_s) if problem.cost_s is not None else None,
                "cost_detail": problem.cost_detail}

    def _compile_modes(self, view: RunView) -> dict[str | None, list[str]]:
        """Per compile: why CUDA graphs were skipped, and what autotuning picked (one line each)."""
        lines: dict[str | None, list[str]] = {}
        for c in view.profile.cudagraphs if view.profile is not None else ():
            lines.setdefault(c.compile_id, []).append(cudagraph_line(c))
        for k in view.cudagraph_skips:
            lines.setdefault(k.compile_id, []).append(f"CUDA graphs skipped: {k.reason}")
        for a in view.autotuning:
            timed = ", ".join(f"{c.name} {c.ms:.4f} ms" if c.ms is not None else f"{c.name} failed" for c in a.choices[:5])
            lines.setdefault(a.compile_id, []).append(
                f"autotuned {a.op}: picked {a.picked} of {a.choices_total} choices ({timed})")
        return lines

    def _runtime(self, view: RunView) -> dict[str, Any] | None:
        """Where the profiled run's time went (None when it was not profiled)."""
        profile, split = view.profile, view.time_split
        if profile is None or split is None:
            return None
        overall = view.vs_eager
        vs_eager = None
        if overall is not None:
            vs_eager = (f"not comparable: {overall.why_not}" if not overall.comparable or overall.speedup is None
                        else f"compiled code ran {overall.speedup:.2f}× the eager run's speed; "
                             + (f"compiling ({seconds_text(overall.compile_s)}) paid back after "
                                f"{overall.break_even_calls} steps" if overall.break_even_calls is not None
                                else "compiling never pays back"))
        return {
            "method": "CUDA events (device time)" if profile.method == "cuda_events" else "the host clock",
            "wall": seconds_text(split.wall_s),
            "parts": [{"label": label, "time": seconds_text(value),
                       "share": round(100 * value / split.wall_s) if split.wall_s > 0 else 0} for label, value in split.parts()],
            "vs_eager": vs_eager,
        }

    def _compile_flame(self, view: RunView) -> dict[str, Any]:
        """Compile time by phase, flame-style: per frame a bar of its whole compile time, the phases
        under it (they sum to it), and under Inductor's phases the costliest modules (an estimate)."""
        frames = view.frame_compile_times[: self.limits.timeline_frames]
        widest = max((f.total_s for f in frames), default=0.0)
        if widest <= 0:
            return {"frames": [], "legend": []}
        rows = []
        for f in frames:
            scale = 100 / widest
            x, phases, module_x = 0.0, [], None
            for phase, seconds in f.seconds.items():
                if module_x is None and phase in _FLAME_INDUCTOR_START:
                    module_x = x
                phases.append({"x": x, "width": seconds * scale, "color": _PHASE_COLORS[phase],
                               "title": f"{phase_label(phase)}: {seconds_text(seconds)} ({seconds / f.total_s:.0%})"})
                x += seconds * scale
            mx, modules = module_x or 0.0, []
            for m in f.modules:
                modules.append({"x": mx, "width": m.seconds * scale,
                                "title": f"{m.module}: ~{seconds_text(m.seconds)} of Inductor time ({m.nodes} nodes)"})
                mx += m.seconds * scale
            rows.append({"label": f"{friendly_function(f.function)} ({location(f.file, f.line, self.cwd)})",
                         "total": seconds_text(f.total_s), "width": f.total_s * scale, "phases": phases,
                         "modules": modules})
        used = {p for f in frames for p in f.seconds}
        return {"frames": rows, "legend": [{"name": phase_label(p), "color": c} for p, c in _PHASE_COLORS.items()
                                           if p in used]}

    def _timeline(self, compiles: list[Compile]) -> dict[str, Any]:
        """One row per frame; each compile a bar at its start time, split by stage."""
        timed = [c for c in compiles if c.started and c.times.total]
        if not timed:
            return {"rows": [], "legend": [], "span_s": 0, "note": None}
        started = {c.compile_id: c.started or 0.0 for c in timed}  # every timed compile has a start
        t0 = min(self.capture.run.started or started[c.compile_id] for c in timed)
        t0 = min(t0, *started.values())
        end = max(started[c.compile_id] + compile_seconds(c) for c in timed)
        span = max(end - t0, 1e-6)
        frames: dict[Any, list[Compile]] = {}
        for c in timed:
            frames.setdefault(c.frame_id, []).append(c)
        rows = []
        for cs in list(frames.values())[: self.limits.timeline_frames]:
            bars = []
            for c in cs:
                x = 100 * (started[c.compile_id] - t0) / span
                segments = []
                for name, seconds in c.times.by_stage().items():
                    if name == "backward":
                        continue
                    segments.append({"name": name, "width": 100 * seconds / span, "color": _STAGE_COLORS.get(name)})
                bars.append({"compile_id": c.compile_id, "x": x, "segments": segments,
                             "title": f"{c.compile_id} {friendly_function(c.function)}: {c.times.total:.2f} s"})
            rows.append({"label": f"{friendly_function(cs[0].function)} ({location(cs[0].file, cs[0].line, self.cwd)})",
                         "bars": bars})
        note = (f"{len(frames) - self.limits.timeline_frames} more frames are not drawn"
                if len(frames) > self.limits.timeline_frames else None)
        return {"rows": rows, "span_s": span, "note": note,
                "legend": [{"name": n, "color": c} for n, c in _STAGE_COLORS.items()]}

    def _break(self, index: int, group) -> dict[str, Any]:
        loc = group.location
        excerpt = self.sources.excerpt(loc.file, loc.line)
        return {
            **break_json(group),
            "id": f"r{self.index}-break-{index}",
            "doc_url": doc_url(group.doc_link),
            "where": location(loc.file, loc.line, self.cwd), "shown_function": friendly_function(loc.function),
            "shown_resumed_into": [friendly_function(r) for r in group.resumed_into],
            "stack": [{"where": location(f.file, f.line, self.cwd), "function": friendly_function(f.function),
                       "code": f.code} for f in group.first.user_stack],
            "excerpt": None if excerpt is None else [{"no": n, "text": t, "marked": n == loc.line}
                                                    for n, t in excerpt.lines],
            "source_withheld": self.sources.withheld(loc.file),
        }

    def _recompile(self, index: int, recompile) -> dict[str, Any]:
        failure = recompile.failures[0]
        diff = None
        if index < self.limits.recompile_diffs and failure.failed_compile_id in {c.compile_id for c in self.capture.compiles()}:
            result = diff_compiles(self.capture, failure.failed_compile_id, recompile.compile_id)
            diff = {
                "graph": result.graph.summary_lines()[1:] if result.graph else [],
                "guards": [{"mark": g.mark, "subject": g.subject, "before": g.before, "after": g.after}
                           for g in result.guard_changes],
                "guard_counts": (result.guards_a, result.guards_b),
            }
        return {
            **recompile_json(recompile),
            "id": f"r{self.index}-recompile-{index}",
            "shown_function": friendly_function(recompile.function),
            "where": location(recompile.file, recompile.line, self.cwd),
            "diff": diff,
            "advice": advice_for(self.capture, recompile),  # which dimension of which input, what to do
        }

    def _detailed_ids(self, compiles, groups, recompiles) -> set[str]:
        interesting = [c.compile_id for c in compiles if c.status != "ok"]
        interesting += [cid for g in groups for cid in g.compile_ids]
        interesting += [r.compile_id for r in recompiles] + [f.failed_compile_id for r in recompiles for f in r.failures]
        interesting += [c.compile_id for c in sorted(compiles, key=lambda c: -(c.times.total or 0))]
        chosen: list[str] = []
        for cid in interesting:
            if cid not in chosen and len(chosen) < self.limits.detailed_compiles:
                chosen.append(cid)
        return set(chosen)

    def _compile(self, c: Compile, detailed: bool) -> dict[str, Any]:
        stages = self.capture.stages(c.compile_id) if detailed else []
        payload, note = (self._payload(c, stages) if detailed else (None, None))
        return {
            **compile_json(c, self.capture.recorded_stage_names(c.compile_id)),
            "id": f"r{self.index}-c-{c.compile_id.replace('/', '-').replace('!', 'ca')}",
            "shown_function": friendly_function(c.function),
            "where": location(c.file, c.line, self.cwd), "time_s": compile_seconds(c),
            "fail": f"{c.fail_type}: {c.fail_reason}" if c.fail_type else None,
            "pipeline": [stage_json(s) for s in stages],
            "payload": payload, "payload_note": note,
            "modes": self._modes.get(c.compile_id, []),
            "attempts_note": attempts_note(c.attempts, c.restart_reasons) if c.attempts > 1 else None,
        }

    def _payload(self, c: Compile, stages: list[Stage]) -> tuple[str | None, str | None]:
        data: dict[str, Any] = {"stages": {}, "kernels": []}
        truncated = []
        for stage in stages:
            if not stage.recorded:
                continue
            entry = self._stage_entry(stage, stages)
            if entry.pop("_truncated"):
                truncated.append(stage.key)
            data["stages"][stage.key] = entry
        for kernel in self.capture.kernels(c.compile_id):
            data["kernels"].append({**kernel_json(kernel),
                                    "lines": [self._line_ref(f.file, f.line) for f in kernel.source_lines[:12]]})
        # The page shows these strings as text (textContent): control characters and bidi
        # overrides visible there too, then ASCII JSON.
        raw = json_text(visible_strings(data), separators=(",", ":"))
        if len(raw) > self.payload_left:
            return None, "not embedded: the report's payload budget was used up (use `dynscope show`)"
        self.payload_left -= len(raw)
        note = f"truncated to {self.limits.stage_bytes:,} characters: {', '.join(truncated)}" if truncated else None
        return base64.b64encode(gzip.compress(raw.encode("ascii"), 6)).decode("ascii"), note

    def _stage_entry(self, stage: Stage, stages: list[Stage]) -> dict[str, Any]:
        limit = self.limits.stage_bytes
        text = self.capture.stage_text(stage)
        entry: dict[str, Any] = {"language": stage.language, "text": text[:limit], "_truncated": len(text) > limit,
                                 "views": {}, "diff": None, "graph": None, "nodes": None}
        for view, digest in stage.variants.items():
            if digest != stage.payload_hash:
                entry["views"][view] = self.capture.stage_text(stage, view)[:limit]
        parent = previous_recorded(stages, stage)
        if parent is not None:
            step = diff_stages(self.capture, parent, stage)
            entry["diff"] = {"from": parent.key, "summary": step.summary_lines()[1:],
                             "lines": list(step.text_diff[:4000]), "cut": len(step.text_diff) > 4000}
        graph = self.capture.fx_graph(stage)
        if graph is not None:
            entry["nodes"] = [[n.name, n.op_kind, n.target, _shape(n.tensor), n.user_frame.line if n.user_frame else None]
                              for n in graph.nodes if n.op != "output"][:5000]
            entry["graph"] = self._graph(stage, len(graph.compute_nodes))
        return entry

    def _graph(self, stage: Stage, compute_nodes: int) -> dict[str, Any]:
        collapse = None if compute_nodes <= self.limits.graph_nodes else ("kernel" if stage.name == "post_grad" else "module")
        try:
            dot = stage_to_dot(self.capture, stage, collapse=collapse, max_nodes=self.limits.graph_nodes)
        except DynscopeError as e:
            return {"svg": None, "dot": None, "note": str(e)}
        if self.graphs.take():
            try:
                svg = render_svg(dot)
                return {"svg": base64.b64encode(svg.encode("utf-8", "backslashreplace")).decode("ascii"),
                        "dot": None, "note": f"collapsed by {collapse}" if collapse else None}
            except DynscopeError as e:
                return {"svg": None, "dot": dot, "note": str(e)}
        return {"svg": None, "dot": dot, "note": self.graphs.note()}

    def _line_ref(self, file: str | None, line: int | None) -> dict[str, Any]:
        excerpt = self.sources.excerpt(file, line, context=2)
        return {"where": location(file, line, self.cwd), "line": line,
                "excerpt": None if excerpt is None else [[n, t] for n, t in excerpt.lines]}


def _shape(tensor: Any) -> str:
    if isinstance(tensor, dict) and "shape" in tensor:
        return f"{tensor.get('dtype', '')}[{', '.join(str(d) for d in tensor['shape'])}]"
    if isinstance(tensor, dict) and "sym" in tensor:
        return f"sym {tensor['sym']}"
    return ""

