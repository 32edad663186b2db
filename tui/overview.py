"""The first screen: what ran, the headline counts, and what went wrong, worst first."""

from __future__ import annotations

import os

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from dynscope.analysis.alerts import RunAlert, clean_line
from dynscope.analysis.names import friendly_function, location, plural, seconds_text
from dynscope.analysis.overview import Totals, not_understood_line, parts_text
from dynscope.analysis.problems import (
    CompileErrorProblem,
    GraphBreakProblem,
    Problem,
    RecompileLimitProblem,
    RecompileProblem,
    SkippedFrameProblem,
)
from dynscope.analysis.run_view import RunView, run_view
from dynscope.events import ProblemKind
from dynscope.exhaustive import assert_never
from dynscope.model import Capture, Run
from dynscope.tui.messages import ShowBreak, ShowGuards, ShowStage
from dynscope.tui.text import first_line, line, lines_of, plain, seconds

_KIND_STYLE: dict[ProblemKind, str] = {"error": "bold red", "recompile_limit": "bold red", "skipped_frame": "bold yellow",
               "graph_break": "bold yellow", "recompile": "bold magenta"}


class OverviewPane(Vertical):
    def __init__(self, capture: Capture, totals: Totals, problems: list[Problem], *, hide_volatile: bool,
                 divergence: tuple = (), comparison: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.divergence = divergence
        self.comparison = comparison
        self.capture = capture
        self.totals = totals
        self.problems = problems
        self.hide_volatile = hide_volatile

    def compose(self) -> ComposeResult:
        yield Static(run_facts(self.capture, self.totals, hide_volatile=self.hide_volatile), id="run-facts")
        if self.divergence:
            yield Static(plain("Where the ranks diverge", "bold red"), classes="section-title")
            yield Static(divergence_text(self.divergence), id="divergence")
        if self.comparison:
            yield Static(plain(f"Compared with {self.comparison[0]}", "bold"), classes="section-title")
            yield Static(comparison_text(self.comparison[1:]), id="comparison")
        view = run_view(self.capture)
        if view.alerts:  # a wrong or slow run is not clean, whatever its compiles say: first
            yield Static(plain("Needs attention", "bold red"), classes="section-title")
            yield Static(alerts_text(view.alerts, self.capture.run.cwd), id="alerts")
        order = "most costly first" if view.profiled else "worst first"
        title = f"Top problems ({len(self.problems)}), {order}" if self.problems else clean_line(view.alerts)
        yield Static(plain(title, "bold"), classes="section-title")
        if self.problems:
            options = [Option(problem_prompt(i, p, self.capture.run.cwd), id=str(i))
                       for i, p in enumerate(self.problems, 1)]
            yield OptionList(*options, id="problems")
        else:
            yield Static(plain("torch.compile reported no graph breaks, recompiles or compile errors in this run."))

    def focus_main(self) -> None:
        if self.problems:
            self.query_one("#problems", OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        problem = self.problems[int(event.option.id or 1) - 1]
        match problem:
            case GraphBreakProblem(group=group):
                self.post_message(ShowBreak(group.first.event_id))
            case RecompileProblem() | RecompileLimitProblem():
                self.post_message(ShowGuards(problem.compile_ids[0]))
            case CompileErrorProblem() | SkippedFrameProblem():
                self.post_message(ShowStage(problem.compile_ids[0]))
            case _:
                assert_never(problem)


def alerts_text(alerts: list[RunAlert], cwd: str | None) -> Text:
    rows = []
    for alert in alerts:
        rows.append(plain(alert.title, "bold red"))
        if alert.file:
            rows.append(plain(f"  {location(alert.file, alert.line, cwd)}", "cyan"))
        rows.append(plain(f"  {alert.detail}"))
    return lines_of(*rows)


def divergence_text(divergence: tuple) -> Text:
    text = Text()
    for i, d in enumerate(divergence):
        if i:
            text.append("\n")
        text.append(plain("first: " if d.first else f"{d.what.replace('_', ' ')}: ", "bold"))
        text.append(plain(d.detail))
    return text


def comparison_text(lines: tuple[str, ...]) -> Text:
    styles = {"+": "red", "-": "green", "~": "yellow"}
    return Text("\n").join(plain(line, styles.get(line[:1], "")) for line in lines)


def run_facts(capture: Capture, totals: Totals, *, hide_volatile: bool) -> Text:
    run = capture.run
    torch_version = "(hidden)" if hide_volatile else run.torch_version or "?"
    rows = [line(("dynscope", "bold cyan"), "  ", ("torch ", "dim"), torch_version,
                 ("  device ", "dim"), device_text(run), "  ", rank_text(run), "  ", outcome(run, hide_volatile))]
    if not hide_volatile:
        rows.append(line(("capture ", "dim"), run.path, ("  command ", "dim"), " ".join(run.program_command)))
    else:
        rows.append(line(("capture ", "dim"), os.path.basename(run.path)))
    rows.append(line(
        ("counts ", "dim"),
        f"{plural(totals.frames, 'frame')} · {plural(totals.compiles, 'compile')} · {plural(totals.graphs, 'graph')} · ",
        (f"{plural(totals.graph_breaks, 'graph break')} ({totals.distinct_graph_breaks} distinct)",
         "bold yellow" if totals.graph_breaks else ""),
        " · ", (plural(totals.recompiles, "recompile"), "bold magenta" if totals.recompiles else ""),
        *((" · ", (plural(totals.recompile_limit_hits, "recompile-limit hit"), "bold red"))
          if totals.recompile_limit_hits else ()),
        *((" · ", (plural(totals.skipped_frames, "frame") + " ran in eager", "bold yellow"))
          if totals.skipped_frames else ()),
        " · ", (plural(totals.errors, "error"), "bold red" if totals.errors else ""),
    ))
    if not hide_volatile and totals.compile_time_s:
        by_stage = parts_text(totals.time_by_phase, "")
        rows.append(line(("compile time ", "dim"), seconds(totals.compile_time_s), (f"  ({by_stage})", "dim")))
    view = run_view(capture)
    if not hide_volatile:
        rows.extend(time_rows(view))
    if totals.compiles == 0:
        rows.append(plain("torch.compile compiled nothing: was the compiled function called?", "yellow"))
    exception = capture.exception
    if exception is not None:
        raised = f"{exception.type}: {first_line(exception.message)}"
        rows.append(line(("the program raised ", "red"), (raised, "bold red")))
    for result in view.minify_results:
        rows.append(line(("dynscope minify ", "bold red"), result.headline))
    missing = [name for name, ok in run.probes.items() if not ok]
    imported = capture.run.imported
    if isinstance(imported, dict):
        unreadable = f", {imported.get('bad_lines')} unreadable lines" if imported.get("bad_lines") else ""
        rows.append(line(("imported from TORCH_TRACE: ", "dim"), f"{imported.get('events', 0)} events{unreadable}"))
        if missing:
            rows.append(line(("not in a TORCH_TRACE log: ", "yellow"), ", ".join(missing)))
    elif missing:
        rows.append(line(("not recorded on this torch: ", "yellow"), ", ".join(missing)))
    if run.probe_errors:
        rows.append(plain(f"{run.probe_errors} probe errors: the capture may be incomplete", "yellow"))
    unread = not_understood_line(view.not_understood)
    if unread:
        rows.append(plain(unread, "yellow"))
    return lines_of(*rows)


def time_rows(view: RunView) -> list[Text]:
    """Where the profiled run's time went, and the comparison with eager when there is one (none: not profiled)."""
    split = view.time_split
    if split is None:
        return []
    rows = [line(("time ", "dim"), f"{seconds_text(split.wall_s)} profiled: ",
                 ("compiled graphs ", "dim"), seconds_text(split.compiled_s),
                 (" · at graph breaks ", "dim"), (seconds_text(split.eager_between_graphs_s), "bold magenta"),
                 (" · guards ", "dim"), seconds_text(split.guard_s),
                 (" · compiling ", "dim"), seconds_text(split.compile_s),
                 (" · rest ", "dim"), seconds_text(split.rest_s))]
    overall = view.vs_eager
    if overall is not None and overall.comparable and overall.speedup is not None:
        paid = (f"compiling paid back after {plural(overall.break_even_calls, 'step')}"
                if overall.break_even_calls is not None else "compiling never pays back")
        rows.append(line(("vs eager ", "dim"), (f"{overall.speedup:.2f}×", "bold green" if overall.speedup > 1
                                                else "bold red"), f"  {paid}"))
    elif overall is not None:
        rows.append(line(("vs eager ", "dim"), (f"not comparable: {overall.why_not}", "yellow")))
    return rows


def device_text(run: Run) -> str:
    device = run.device
    if device.get("cuda"):
        name = device.get("cuda_device") or "CUDA"
        count = device.get("cuda_count")
        return f"{name} ×{count}" if isinstance(count, int) and count > 1 else str(name)
    return "CPU"


def rank_text(run: Run) -> str:
    if run.world_size and run.world_size > 1:
        return f"rank {run.rank} of {run.world_size}"
    return "single process"


def outcome(run: Run, hide_volatile: bool) -> Text:
    text = plain(run.outcome, "green" if run.exit_code == 0 and not run.signal else "bold red")
    if run.duration_s is not None and not hide_volatile:
        text.append(f" after {run.duration_s:.1f} s")
    return text


def problem_prompt(index: int, problem: Problem, cwd: str | None) -> Table:
    """A problem in a two-column grid, so its wrapped lines keep their indent."""
    head = plain(problem.title, _KIND_STYLE[problem.kind])
    if isinstance(problem, GraphBreakProblem) and problem.count > 1:  # the other kinds' titles say their count
        head.append(f"  ×{problem.count}", style="bold")
    if problem.cost_s is not None:
        head = line((f"{seconds_text(problem.cost_s)}  ", "bold magenta"), head)
    where = problem.location
    rows = [head, line((location(where.file, where.line, cwd), "cyan"),
                       (f" in {friendly_function(where.function)}" if where.function else "", "dim"))]
    if problem.explanation:
        rows.append(plain(problem.explanation))
    if problem.cost_detail:
        rows.append(plain(problem.cost_detail, "magenta" if problem.cost_s is not None else "dim"))
    if problem.hint:
        rows.append(plain(f"try: {problem.hint}", "green"))
    for fix in problem.fixes:
        rows.append(plain(f"verified fix (dynscope fix): {fix}", "bold green"))
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=3, justify="right")
    grid.add_column(ratio=1)
    grid.add_row(plain(f"{index}.", "bold"), lines_of(*rows))
    return grid
