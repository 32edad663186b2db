"""One compile's stages in pipeline order: the stage's text, or the diff from the stage it came from.

Reading a stage means decompressing its payload and highlighting it, and the first look at a
compile builds its whole pipeline from the capture: that happens in a worker thread, so
keys stay responsive on large captures. The newest request wins; older results are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from textual.worker import get_current_worker

from dynscope.analysis.compile_time import phase_label
from dynscope.analysis.diff import diff_stages, previous_recorded
from dynscope.analysis.names import friendly_function, seconds_text
from dynscope.analysis.search import definition_line
from dynscope.errors import DynscopeError
from dynscope.model import Capture, Stage
from dynscope.model.stages import STAGE_TITLES
from dynscope.tui.code_view import CodeView
from dynscope.tui.text import code_lines, line, lines_of, plain


@dataclass(frozen=True)
class StageRequest:
    compile_id: str
    stage_key: str | None = None  # None: the first stage
    index: int | None = None  # or by position in the pipeline
    diff: bool = False
    variant: str | None = None  # None: the stage's main view
    node: str | None = None  # an FX node to mark


@dataclass
class StageView:
    """What the panel shows for one request (built off the UI thread)."""

    request: StageRequest
    stages: list[Stage]
    index: int
    title: Text
    lines: list[Text] = field(default_factory=list)
    numbers: bool = True
    mark: int | None = None


class StageStepper(Vertical):
    def __init__(self, capture: Capture, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.capture = capture
        self.view: StageView | None = None
        self._latest: StageRequest | None = None

    def compose(self) -> ComposeResult:
        yield Static(plain("Select a compile in the tree to step through its stages.", "dim"), id="stage-title")
        yield CodeView(id="stage-code")

    # -- what tests and the pane read -------------------------------------------------------

    @property
    def stage(self) -> Stage | None:
        return self.view.stages[self.view.index] if self.view else None

    @property
    def compile_id(self) -> str | None:
        return self._latest.compile_id if self._latest else None

    @property
    def code(self) -> CodeView:
        return self.query_one("#stage-code", CodeView)

    # -- requests ---------------------------------------------------------------------------

    def show(self, compile_id: str, stage_key: str | None = None, *, node: str | None = None) -> None:
        self._request(StageRequest(compile_id, stage_key, node=node))

    def step(self, delta: int) -> None:
        latest = self._latest
        if self.view is None or latest is None or latest.compile_id != self.view.request.compile_id:
            return  # nothing shown yet, or another compile is loading
        # From the latest request, not the stage on screen, so quick presses add up.
        current = latest.index if latest.index is not None else self.view.index
        index = min(max(current + delta, 0), len(self.view.stages) - 1)
        if index != current:
            self._request(StageRequest(latest.compile_id, index=index, diff=latest.diff))

    def toggle_diff(self) -> None:
        if self.view is not None:
            r = self.view.request
            self._request(StageRequest(r.compile_id, index=self.view.index, diff=not r.diff, variant=r.variant))

    def next_variant(self) -> None:
        """Cycle through the stage's views (before/after passes, original/modified bytecode)."""
        stage = self.stage
        if self.view is None or stage is None or len(stage.variants) < 2:
            return
        names = list(stage.variants)
        current = self.view.request.variant or _main_variant(stage)
        following = names[(names.index(current) + 1) % len(names)] if current in names else names[0]
        r = self.view.request
        self._request(StageRequest(r.compile_id, index=self.view.index, diff=r.diff, variant=following))

    def _request(self, request: StageRequest) -> None:
        self._latest = request
        self._load(request)

    @work(thread=True, exclusive=True, group="stage")
    def _load(self, request: StageRequest) -> None:
        try:
            # times differ from run to run: left out where the app hides what is volatile (snapshot tests)
            view = build_view(self.capture, request, compile_time=not getattr(self.app, "hide_volatile", False))
        except DynscopeError as e:
            view = StageView(request, [], 0, plain(f"cannot show {request.compile_id}: {e}", "red"))
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._display, view)

    def _display(self, view: StageView) -> None:
        if view.request is not self._latest:
            return  # a newer request is on its way
        self.view = view if view.stages else None
        self.query_one("#stage-title", Static).update(view.title)
        self.code.show(view.lines, mark=view.mark, numbers=view.numbers)


def build_view(capture: Capture, request: StageRequest, *, compile_time: bool = False) -> StageView:
    compile_ = capture.compile(request.compile_id)
    stages = capture.stages(request.compile_id)
    if not stages:
        return StageView(request, [], 0, plain(f"{request.compile_id}: no stages were recorded", "yellow"))
    index = request.index if request.index is not None else next(
        (i for i, s in enumerate(stages) if s.key == request.stage_key), 0)
    stage = stages[index]
    head = line((f"{compile_.compile_id} ", "bold"), (friendly_function(compile_.function), "bold cyan"),
                (f"  stage {index + 1}/{len(stages)}  ", "dim"), (stage.key, "bold"),
                (f"  {_title(stage)}", "dim"))
    phases = capture.compile_phases().get(request.compile_id) if compile_time else None
    if phases is not None:
        head = lines_of(head, line((f"compile time {seconds_text(phases.traced_s)}: "
                                    + " · ".join(f"{phase_label(p)} {seconds_text(v)}" for p, v in phases.seconds), "dim")))
    view = StageView(request, stages, index, head)
    if not stage.recorded:
        view.title = lines_of(head, plain(f"missing: {stage.missing_reason}", "yellow"))
        view.lines, view.numbers = [plain(f"This stage was not recorded: {stage.missing_reason}", "yellow")], False
    elif request.diff:
        _fill_diff(capture, view, stage)
    else:
        text = capture.stage_text(stage, request.variant)
        variant = request.variant or _main_variant(stage)
        views = f" · view {variant} (v: {', '.join(stage.variants)})" if len(stage.variants) > 1 else ""
        view.title = lines_of(head, line((f"{stage.language} · {stage.size:,} bytes{views} · d: diff", "dim")))
        view.lines = code_lines(text, stage.language)
        view.mark = definition_line(text, request.node) if request.node else None
    return view


def _fill_diff(capture: Capture, view: StageView, stage: Stage) -> None:
    before = previous_recorded(view.stages, stage)
    if before is None:
        view.title = lines_of(view.title, plain("diff: no earlier recorded stage to compare with (d: back)", "dim"))
        view.lines, view.numbers = [plain(f"{stage.key} is where this compile's recorded pipeline starts.")], False
        return
    result = diff_stages(capture, before, stage, after_variant=view.request.variant)
    view.title = lines_of(view.title, line((f"diff from {before.key} (d: back to the stage)", "dim")))
    summary = [plain(row, "bold" if i == 0 else "") for i, row in enumerate(result.summary_lines())]
    diff = code_lines("\n".join(result.text_diff), "text", lexer="diff") if result.text_diff else []
    unchanged = [] if diff or result.text_note else [plain("(the text is unchanged)", "dim")]
    view.lines = summary + [plain("")] + diff + unchanged
    view.numbers = False


def _title(stage: Stage) -> str:
    if stage.name == "kernel":
        return f"{stage.language} kernel" + (" (backward)" if stage.graph == "backward" else "")
    return STAGE_TITLES.get(stage.name, "")


def _main_variant(stage: Stage) -> str | None:
    for variant in ("graph", "after", "code", "original"):
        if variant in stage.variants:
            return variant
    return next(iter(stage.variants), None)
