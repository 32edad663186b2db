"""The end-of-run summary on the terminal (rich): what torch.compile did, and why."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from rich.console import Console, Group
from rich.markup import escape
from rich.text import Text

from dynscope.analysis.cache_text import cache_lines
from dynscope.analysis.compile_time import phase_label
from dynscope.analysis.names import command_line, condensed, first_line, friendly_function, location, plural, seconds_text, short_path
from dynscope.analysis.numerics import NumericsView
from dynscope.analysis.overview import compile_time_parts, not_understood_line, parts_text
from dynscope.analysis.problems import advice_for
from dynscope.analysis.run_view import RunView, run_view
from dynscope.analysis.runtime import VsEager, cudagraph_line
from dynscope.events import ChildCapture
from dynscope.model import Capture, FixResult, RecompileLimitHit, SkippedFrame
from dynscope.reporters import ReportOptions
from dynscope.safe_console import safe_console
from dynscope.safe_text import visible

_MAX_LISTED = 20  # per section; the rest is counted, and is in the TUI and reports


class TerminalReporter:
    """The summary of one capture, or several ranks' counts and where they diverge (rich)."""

    def __init__(self, captures: Sequence[Capture], options: ReportOptions = ReportOptions()) -> None:
        self.captures = list(captures)
        self.options = options

    @classmethod
    def prepare(cls, captures: Sequence[Capture], options: ReportOptions = ReportOptions()) -> TerminalReporter:
        for capture in captures:  # read what the summary shows now, before anything is printed
            view = run_view(capture)
            view.totals, view.not_understood  # noqa: B018
        return cls(captures, options)

    def render(self, out: TextIO) -> None:
        console = safe_console(file=out, highlight=False)
        if len(self.captures) == 1:
            render_summary(self.captures[0], console, compile_time=self.options.compile_time)
        else:
            render_rank_set(self.captures, console)


def render_summary(capture: Capture, console: Console, *, compile_time: bool = False) -> None:
    view = run_view(capture)
    run = capture.run
    compiles, groups, recompiles, errors = view.compiles, view.break_groups, view.recompiles, view.errors
    cwd = run.cwd

    if run.incomplete:
        console.print(_incomplete_line(capture))
    console.print(_headline(capture))
    alerts = _alerts_section(view, cwd)
    if alerts is not None:
        console.print(alerts)
    console.print(_counts(view))
    imported = capture.run.imported
    if isinstance(imported, dict):
        console.print(_imported_line(imported))
    children = run.compiling_children
    if not compiles and children:
        console.print(Text("torch.compile compiled nothing in this process; ", style="yellow") + _children_line(children))
    elif not compiles:
        console.print("[yellow]torch.compile compiled nothing in this run.[/] "
                      "Was the compiled function called? Is torch.compile applied?")
    elif children:
        console.print(_children_line(children))
    console.print()
    if view.profiled:
        console.print(_runtime_section(view))
    limit_hits = view.recompile_limit_hits
    if limit_hits:
        console.print(_limit_section(limit_hits, cwd))
    skipped = view.skipped_frames
    if skipped:
        console.print(_skipped_section(skipped, cwd))
    fixes = view.fix_results
    if groups:
        console.print(_breaks_section(view, cwd, fixes))
    if recompiles:
        console.print(_recompiles_section(view, cwd, fixes))
    if errors:
        console.print(Text(f"Compile errors ({len(errors)})", style="bold red"))
        for e in errors[:_MAX_LISTED]:
            where = location(e.user_file, e.user_line, cwd) if e.user_file else location(e.file, e.line, cwd)
            console.print(f"  [red]{escape(e.compile_id)}[/] {escape(friendly_function(e.function))} "
                          f"({escape(where)}): [bold]{escape(e.fail_type)}[/]: {escape(condensed(e.reason))}")
            for line in _fix_lines(fixes, "error", e.user_file or e.file, e.user_line or e.line):
                console.print(line)
        console.print()
    for result in view.minify_results:
        console.print(Text("dynscope minify: ", style="bold red") + Text(result.headline))
    if view.numerics is not None:
        console.print(_numerics_section(view.numerics, cwd))
    modes = _compile_modes_section(view)
    if modes is not None:
        console.print(modes)
    caches = cache_lines(view.caches)
    if caches:  # only where caches were kept (or a run says more): a caches-off run's summary is unchanged
        console.print(Text(caches[0].replace("caches:", "Caches:", 1), style="bold"))
        for cache_line in caches[1:]:
            console.print(Text(cache_line))
        console.print()
    if compiles:
        console.print(_frames_section(view, cwd))
    if compile_time:
        console.print(_compile_time_section(view, cwd))
    _footer(view, console)


def _alerts_section(view: RunView, cwd: str | None) -> Group | None:
    """What is wrong beyond the compiles (a numerics suspect, compiled no faster than eager), first."""
    if not view.alerts:
        return None
    rows = [Text("Needs attention", style="bold red")]
    for alert in view.alerts:
        rows.append(Text(f"  ! {alert.title}", style="bold red"))
        if alert.file:
            rows.append(Text(f"    {location(alert.file, alert.line, cwd)}", style="cyan"))
        rows.append(Text(f"    {alert.detail}"))
    return Group(*rows)


def _imported_line(imported: dict) -> Text:
    """An imported TORCH_TRACE log: what was read, what was not, what a log cannot hold."""
    text = Text(f"Imported from TORCH_TRACE: {imported.get('events', 0)} events", style="dim")
    if imported.get("bad_lines"):
        examples = imported.get("bad_examples") or ["?"]
        text.append(f" · {imported['bad_lines']} unreadable lines (first: {examples[0]})", style="yellow")
    if imported.get("payload_mismatches"):
        text.append(f" · {imported['payload_mismatches']} payloads cut short", style="yellow")
    text.append(" · not in a log: structural FX graphs, guard-failure details, bytecode and scheduler IR",
                style="dim")
    return text


def render_rank_set(captures: list[Capture], console: Console) -> None:
    """Several ranks: each rank's counts, then where they diverge."""
    from dynscope.analysis.ranks import rank_differences

    differences = rank_differences(captures)
    for capture in captures:
        if capture.run.incomplete:
            console.print(_incomplete_line(capture))
    for label, capture in zip(differences.labels, captures):
        alerts = _alerts_section(run_view(capture), capture.run.cwd)
        if alerts is not None:
            console.print(Text(label, style="bold"), alerts)
    console.print(Text(f"{len(captures)} captures", style="bold"))
    for label, t in zip(differences.labels, differences.totals):
        console.print(f"  {escape(label)}: {plural(t.compiles, 'compile')} · {plural(t.graph_breaks, 'graph break')} · "
                      f"{plural(t.recompiles, 'recompile')} · {plural(t.errors, 'error')}")
    console.print()
    if not differences.divergence:
        console.print("[green]Every rank compiled the same way.[/]")
        return
    console.print(Text("Where the ranks diverge", style="bold red"))
    for d in differences.divergence:
        mark = "first" if d.first else d.what.replace("_", " ")
        console.print(f"  [bold]{escape(mark)}:[/] {escape(d.detail)}")


def _incomplete_line(capture: Capture) -> Text:
    """First, before any number: a cut recording's counts are only a lower bound."""
    from dynscope.safe_text import visible

    return Text(f"INCOMPLETE CAPTURE {visible(capture.path)}: {visible(capture.run.incomplete or '')}; "
                "everything below covers only what was recorded before that", style="bold red")
def _children_line(children: Sequence[ChildCapture]) -> Text:
    """'2 child processes compiled: see run.pid12.dynscope, run.pid13.dynscope'."""
    shown = ", ".join(visible(c.file) for c in children[:_MAX_CHILDREN_NAMED])  # names from the capture
    more = f" and {len(children) - _MAX_CHILDREN_NAMED} more" if len(children) > _MAX_CHILDREN_NAMED else ""
    many = "es" if len(children) != 1 else ""
    return Text(f"{len(children)} child process{many} compiled: see {shown}{more}")


_MAX_CHILDREN_NAMED = 3


def _headline(capture: Capture) -> Text:
    run = capture.run
    text = Text("dynscope", style="bold cyan")
    text.append(f" · torch {run.torch_version or '?'}")
    if run.world_size and run.world_size > 1:
        text.append(f" · rank {run.rank} of {run.world_size}")
    if run.signal:
        text.append(f" · killed by signal {run.signal}", style="bold red")
    elif run.exit_code is not None:
        text.append(f" · exit {run.exit_code}", style="bold red" if run.exit_code else "green")
    elif not run.ended:
        text.append(" · run did not finish", style="bold red")
    if run.duration_s is not None:
        text.append(f" · {run.duration_s:.1f} s")
    if run.parent_pid is not None:
        text.append(f" · child process {run.pid} of {run.parent_pid}")
    if run.command or run.cwd:
        # What was run, and where: before anyone reruns it (dynscope fix --from reruns it).
        text.append("\ncommand: ", style="dim")
        text.append(command_line(run.command))
        text.append("  in ", style="dim")
        text.append(run.cwd or "?")
    exception = capture.exception
    if exception is not None:
        text.append(f"\nThe program raised {exception.type}: {condensed(exception.message)}", style="red")
    return text


def _counts(view: RunView) -> Text:
    t = view.totals
    text = Text()
    text.append(f"{plural(t.frames, 'frame')} · {plural(t.compiles, 'compile')} · {plural(t.graphs, 'graph')} · ")
    text.append(f"{plural(t.graph_breaks, 'graph break')} ({t.distinct_graph_breaks} distinct)",
                style="bold yellow" if t.graph_breaks else "")
    text.append(" · ")
    text.append(plural(t.recompiles, "recompile"), style="bold yellow" if t.recompiles else "")
    if t.recompile_limit_hits:
        text.append(" · ")
        text.append(plural(t.recompile_limit_hits, "recompile-limit hit"), style="bold red")
    if t.skipped_frames:
        text.append(" · ")
        text.append(plural(t.skipped_frames, "frame") + " ran in eager", style="bold yellow")
    text.append(" · ")
    text.append(plural(t.errors, "error"), style="bold red" if t.errors else "")
    if t.compile_time_s:
        text.append(f"\nCompile time {t.compile_time_s:.2f} s: {parts_text(t.time_by_phase)}")
    return text


def _fix_lines(fixes: Sequence[FixResult], kind: str, file: str | None, line: int | None, function: str | None = None) -> list[Text]:
    """The remedies `dynscope fix` proved for this problem, beside it."""
    return [Text(f"    verified fix (dynscope fix): {f.remedy} — {f.verdict}, outputs equal", style="bold green")
            for f in fixes if f.matches(kind, file, line, function)]


def _breaks_section(view: RunView, cwd: str | None, fixes: Sequence[FixResult] = ()) -> Group:
    ranked = view.breaks_by_cost
    groups, costings = [b.group for b in ranked], [b.costing for b in ranked]
    total = sum(g.count for g in groups)
    order = "most costly first" if view.profiled else "most frequent first"
    rows: list = [Text(f"Graph breaks ({len(groups)} distinct, {total} in all), {order}", style="bold yellow")]
    for i, (g, costing) in enumerate(zip(groups[:_MAX_LISTED], costings), 1):
        title = Text(f" {i}. ×{g.count}  ", style="bold")
        if costing is not None and costing.cost_s is not None:
            title = Text(f" {i}. {seconds_text(costing.cost_s)}  ", style="bold magenta")
        title.append(g.headline, style="bold yellow")
        if g.gb_id:
            title.append(f"  [{g.gb_id}]", style="dim")
        rows.append(title)
        if costing is not None:
            rows.append(Text(f"    {costing.detail}", style="magenta" if costing.cost_s is not None else "dim"))
        loc = g.location
        where = Text(f"    {location(loc.file, loc.line, cwd)} in {friendly_function(loc.function)}", style="cyan")
        if loc.code:
            where.append(f":  {_clip(loc.code, 70)}", style="white")
        rows.append(where)
        inner = g.first.inner_location  # the break happened inside the stdlib or torch, called from here
        if inner is not None:
            rows.append(Text(f"    inside {location(inner.file, inner.line, cwd)} in {friendly_function(inner.function)}",
                             style="dim"))
        if g.explanation:
            rows.append(Text(f"    {first_line(g.explanation)}"))
        for consequence in g.consequences:
            rows.append(Text(f"    {consequence} (compiles {', '.join(g.skipped_compile_ids[:6])})"
                             if g.skipped_compile_ids else f"    {consequence}", style="bold"))
        for hint in g.hints:
            rows.append(Text(f"    hint: {first_line(hint)}", style="green"))
        rows += _fix_lines(fixes, "graph_break", loc.file, loc.line)
        extra = []
        if g.compile_ids:
            extra.append("compiles " + ", ".join(g.compile_ids[:6]) + (" …" if len(g.compile_ids) > 6 else ""))
        if g.resumed_into:
            extra.append("continues in " + ", ".join(friendly_function(r) for r in g.resumed_into[:2]))
        if g.doc_link:
            extra.append(g.doc_link)
        if extra:
            rows.append(Text("    " + " · ".join(extra), style="dim"))
    if len(groups) > _MAX_LISTED:
        rows.append(Text(f"    … and {len(groups) - _MAX_LISTED} more (see the TUI or a report)", style="dim"))
    rows.append(Text(""))
    return Group(*rows)


def _runtime_section(view: RunView) -> Group:
    """Where the profiled run's time went, and what compiling bought against eager."""
    profile, split = view.profile, view.time_split
    if profile is None or split is None:
        return Group()
    how = "CUDA events (device time)" if profile.method == "cuda_events" else "the host clock"
    cut = "" if profile.complete else ", up to the last snapshot before the run was cut short"
    rows: list = [Text(f"Where the time went ({seconds_text(split.wall_s)} profiled, measured with {how}{cut})",
                       style="bold magenta")]
    for label, seconds in split.parts():
        share = f"{seconds / split.wall_s:4.0%}" if split.wall_s > 0 else "   –"
        rows.append(Text(f"  {seconds_text(seconds):>9}  {share}  {label}"))
    for entry in profile.entries:
        rows.append(Text(f"  {entry.name}: {plural(entry.calls, 'call')}"
                         + (f", {seconds_text(entry.per_call_s)} a call once compiled" if entry.per_call_s else "")
                         + (f" ({entry.compiling_calls} compiling: {seconds_text(entry.compiling_seconds)})"
                            if entry.compiling_calls else ""), style="dim"))
    for o in view.call_overheads:
        if o.lookup_per_call_s is None:
            continue
        share = f" ({o.lookup_share:.0%} of a call)" if o.lookup_share is not None else ""
        guards = ", ".join(f"{v.compile_id}: {plural(v.guards, 'guard')}"
                           + (f", {v.lambda_guards} Python lambda" if v.lambda_guards else "")
                           for v in o.versions if v.guards is not None)
        rows.append(Text(f"    cache lookup and guard checks: {seconds_text(o.lookup_per_call_s)} a call{share}"
                         + (f" [{guards}]" if guards else ""), style="dim"))
    overall = view.vs_eager
    if overall is not None:
        rows.append(_vs_eager_line(overall))
    rows.append(Text(""))
    return Group(*rows)


def _vs_eager_line(v: VsEager) -> Text:
    compiled, eager = v.compiled_per_call_s, v.eager_per_call_s  # both known when comparable
    if not v.comparable or v.speedup is None or compiled is None or eager is None:
        return Text(f"  vs eager: not comparable: {v.why_not}", style="yellow")
    text = Text(f"  vs eager: compiled code ran {v.speedup:.2f}× "
                f"({seconds_text(compiled)} vs {seconds_text(eager)} a step); ",
                style="bold green" if v.speedup > 1 else "bold red")
    if v.break_even_calls is None:
        text.append(f"compiling ({seconds_text(v.compile_s)}) never pays back: compiled steps are not faster")
    else:
        text.append(f"compiling ({seconds_text(v.compile_s)}) paid back after {plural(v.break_even_calls, 'step')}")
    return text


def _compile_modes_section(view: RunView) -> Group | None:
    """reduce-overhead's CUDA-graph skips and max-autotune's choices, by compile."""
    skips, tuned = view.cudagraph_skips, view.autotuning
    counts = view.profile.cudagraphs if view.profile is not None else ()
    if not skips and not tuned and not counts:
        return None
    rows: list = []
    if counts:
        rows.append(Text("CUDA graphs (mode=\"reduce-overhead\")", style="bold"))
        rows += [Text(f"  {c.compile_id}: {cudagraph_line(c).removeprefix('CUDA graphs: ')}") for c in counts]
    if skips:
        rows.append(Text(f"CUDA graphs skipped ({len(skips)})", style="bold yellow"))
        for k in skips[:_MAX_LISTED]:
            where = f"for {k.compile_id}" if k.compile_id else "at a later call"
            rows.append(Text(f"  {where}: {first_line(k.reason).removeprefix('skipping cudagraphs due to ')}"))
    if tuned:
        rows.append(Text(f"Autotuning ({plural(len(tuned), 'op')})", style="bold"))
        for a in tuned[:_MAX_LISTED]:
            rows.append(Text(f"  {a.compile_id or '?'} {a.op}: picked {a.picked} of {plural(a.choices_total, 'choice')}",
                             style="bold"))
            for c in a.choices[:4]:
                ms = f"{c.ms:.4f} ms" if c.ms is not None else "failed"
                rows.append(Text(f"    {ms:>12}  {c.name}" + (f"  {c.description}" if c.description else ""),
                                 style="green" if c.name == a.picked else "dim"))
    rows.append(Text(""))
    return Group(*rows)


def _numerics_section(n: NumericsView, cwd: str | None) -> Group:
    """What `dynscope numerics` found: the verdict, the first suspect and where it is, the criterion, what to try."""
    style = {"suspect": "bold red", "within": "bold green", "nondeterministic": "bold yellow"}[n.verdict]
    rows: list[Text] = [Text("Numerics (dynscope numerics): ", style="bold") + Text(n.verdict_line, style=style)]
    first, problem = n.first_suspect, n.problem
    if first is not None and problem is not None:
        title = Text("  first suspect: ", style="bold")
        title.append(f"{first.node} ({first.op})", style="bold red")
        if first.kernel:
            title.append(f"  kernel {first.kernel}", style="magenta")
        title.append(f"  graph {first.graph} {first.direction}, node {first.index}", style="dim")
        rows.append(title)
        where = Text(f"    {location(problem.file, problem.line, cwd)}"
                     + (f" in {friendly_function(problem.function)}" if problem.function else ""), style="cyan")
        code = first.stack[-1].code if first.stack else None
        if code:
            where.append(f":  {_clip(code.strip(), 70)}", style="white")
        rows.append(where)
        rows.append(Text(f"    compiled error {first.compiled_error:.3g} vs eager's {first.eager_error:.3g}"))
    rows.append(Text(f"  {n.criterion}", style="dim"))
    if n.growth_nodes:
        rows.append(Text("  compiled error grows >10× at: " + ", ".join(g.node for g in n.growth_nodes[:12])
                         + (" …" if len(n.growth_nodes) > 12 else ""), style="dim"))
    rows.append(Text(f"  {plural(n.suspect_count, 'suspect node')}, "
                     f"{plural(n.nondeterministic_count, 'nondeterministic node')} (changes run to run; not blamed)"))
    varying = n.numerics.nondeterministic
    if varying:
        rows.append(Text("  nondeterministic: " + ", ".join(f"{v.node} ({v.op})" for v in varying[:6])
                         + (" …" if len(varying) > 6 else ""), style="yellow"))
    for hint in n.hints:
        rows.append(Text(f"    try: {hint}", style="green"))
    rows.append(Text(""))
    return Group(*rows)


def _limit_section(hits: list[RecompileLimitHit], cwd: str | None) -> Group:
    rows: list = [Text(f"Recompile limit hit ({len(hits)})", style="bold red")]
    for h in hits:
        head = Text(f"  {friendly_function(h.function)}", style="bold")
        head.append(f" ({location(h.file, h.line, cwd)})", style="cyan")
        value = f"{h.limit_name} = {h.limit}" if h.limit is not None else h.limit_name
        head.append(f": compile {h.compile_id} hit {value}; "
                    + ("torch raised it into the program" if h.fatal
                       else "from then on, calls that match no cached graph run in eager"))
        rows.append(head)
    rows.append(Text(""))
    return Group(*rows)


def _skipped_section(skipped: list[SkippedFrame], cwd: str | None) -> Group:
    rows: list = [Text(f"Frames that ran in eager ({len(skipped)}): Dynamo gave up on them, the program is unaffected",
                       style="bold yellow")]
    for f in skipped[:_MAX_LISTED]:
        head = Text(f"  {f.compile_id} ", style="bold")
        head.append(friendly_function(f.function), style="bold")
        head.append(f" ({location(f.file, f.line, cwd)})", style="cyan")
        head.append(f": {f.headline}")
        if f.user_file:
            head.append(f" at {location(f.user_file, f.user_line, cwd)}", style="cyan")
        rows.append(head)
    if len(skipped) > _MAX_LISTED:
        rows.append(Text(f"  … and {len(skipped) - _MAX_LISTED} more", style="dim"))
    rows.append(Text(""))
    return Group(*rows)


def _recompiles_section(view: RunView, cwd: str | None, fixes: Sequence[FixResult] = ()) -> Group:
    recompiles = view.recompile_runtimes
    rows: list = [Text(f"Recompiles ({len(recompiles)})", style="bold yellow")]
    for version in recompiles[:_MAX_LISTED]:
        r = version.recompile
        head = Text(f"  {friendly_function(r.function)}", style="bold")
        head.append(f" ({location(r.file, r.line, cwd)}) → compile {r.compile_id}", style="cyan")
        if version.calls is not None and version.cost_s is not None:  # profiled
            head.append(f"  served {plural(version.calls, 'call')}; recompiling took "
                        f"{seconds_text(version.cost_s)}", style="magenta")
        rows.append(head)
        failure = r.failures[0]
        line = Text("    guard failed: ")
        line.append(failure.guard or failure.reason, style="yellow")
        if (failure.expected is not None or failure.actual is not None) and "expected" not in line.plain:
            line.append(f"  (expected {failure.expected or '?'}, got {failure.actual or '?'})")
        if failure.failed_compile_id:
            line.append(f"  [cached {failure.failed_compile_id}]", style="dim")
        rows.append(line)
        if failure.user_code:
            rows.append(Text(f"    guard from: {failure.user_code}", style="dim"))
        if len(r.failures) > 1:
            older = len(r.failures) - 1
            rows.append(Text(f"    (+{plural(older, 'older cached compile')} also rejected the call)", style="dim"))
        advice = advice_for(view.capture, r)  # which dimension of which input, and what to do about it
        if advice:
            rows.append(Text(f"    try: {advice}", style="green"))
        rows += _fix_lines(fixes, "recompile", r.file, r.line, r.function)
    if len(recompiles) > _MAX_LISTED:
        rows.append(Text(f"  … and {len(recompiles) - _MAX_LISTED} more", style="dim"))
    rows.append(Text(""))
    return Group(*rows)


def _frames_section(view: RunView, cwd: str | None) -> Group:
    capture, seconds = view.capture, view.compile_seconds
    phases = capture.compile_phases()
    by_id = {c.compile_id: c for c in view.compiles}
    frames = sorted(view.frames, key=lambda f: -sum(seconds[c] for c in f.compile_ids))
    rows: list = [Text("Compiled frames, by compile time", style="bold")]
    for frame in frames[:_MAX_LISTED]:
        cs = [by_id[c] for c in frame.compile_ids]
        line = Text(f"  {sum(seconds[c.compile_id] for c in cs):7.2f} s  ")
        line.append(friendly_function(frame.function), style="bold")
        line.append(f"  {location(frame.file, frame.line, cwd)}", style="cyan")
        ops = sum(c.graph_op_count or 0 for c in cs)
        line.append(f"  {plural(len(cs), 'compile')}, {plural(ops, 'op')}")
        words = {"skipped": "ran in eager", "limit": "hit the recompile limit"}
        bad = sorted({words.get(capture.failure_kind(c) or "", c.status) for c in cs} - {"ok"})
        if bad:
            line.append(f"  {', '.join(bad)}", style="red")
        parts = compile_time_parts(cs, phases)
        if parts:
            line.append(f"  [{parts_text(parts, '')}]", style="dim")
        rows.append(line)
    if len(frames) > _MAX_LISTED:
        rows.append(Text(f"  … and {len(frames) - _MAX_LISTED} more frames", style="dim"))
    return Group(*rows)


def _compile_time_section(view: RunView, cwd: str | None) -> Group:
    """Compile time by phase per frame (phases sum to the frame's compile time) and its costliest modules."""
    rows: list = [Text("Compile time by phase (torch's timed regions; phases sum to each compile's time)", style="bold")]
    frames = view.frame_compile_times
    if not frames:
        rows.append(Text("  torch logged no timed regions for these compiles", style="dim"))
    for frame in frames[:_MAX_LISTED]:
        line = Text(f"  {frame.total_s:7.2f} s  ")
        line.append(friendly_function(frame.function), style="bold")
        line.append(f"  {location(frame.file, frame.line, cwd)}", style="cyan")
        rows.append(line)
        rows.append(Text("      " + " · ".join(f"{phase_label(p)} {seconds_text(v)} ({v / frame.total_s:.0%})"
                                              for p, v in frame.seconds.items() if frame.total_s > 0), style="dim"))
        if frame.modules:
            rows.append(Text("      costliest modules (Inductor time by node share, an estimate): "
                             + ", ".join(f"{m.module} {seconds_text(m.seconds)}" for m in frame.modules), style="dim"))
    if len(frames) > _MAX_LISTED:
        rows.append(Text(f"  … and {len(frames) - _MAX_LISTED} more frames", style="dim"))
    return Group(*rows)


def _footer(view: RunView, console: Console) -> None:
    run = view.run
    console.print()
    if not run.keep_caches:
        console.print("[dim]The Inductor/AOTAutograd caches were off while recording (explain --cold), so every "
                      "stage ran and was recorded.[/]")
    elif view.caches.count("hit"):
        console.print("[dim]Stages a cache hit skipped are marked \"not run: cache hit\" (explain --cold records "
                      "every stage, in a private cache directory).[/]")
    missing = [name for name, ok in run.probes.items() if not ok]
    if missing and run.imported is None:
        why = [f"{name} ({run.probe_details[name]})" if run.probe_details.get(name) else name for name in missing]
        console.print(Text(f"Not recorded on torch {run.torch_version}: " + "; ".join(why), style="yellow"))
    if run.probe_errors:
        console.print(f"[yellow]{plural(run.probe_errors, 'probe error')} recorded; the capture may be incomplete.[/]")
    unread = not_understood_line(view.not_understood)
    if unread:
        console.print(Text(unread, style="yellow"))
    path = short_path(run.path, run.cwd)
    console.print(f"Capture: [bold]{escape(path)}[/]")
    console.print(f"[dim]Explore it: dynscope tui {escape(path)} · dynscope report {escape(path)} -o report.html · "
                  f"dynscope stages {escape(path)}[/]")


def _clip(text: str, width: int) -> str:
    """At most ``width`` characters, cut between words where there is a space to cut at."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip() + " …"

