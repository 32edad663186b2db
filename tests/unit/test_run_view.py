"""The run view derives each fact once, runtime included, and hands views one type per problem
kind. No torch: captures written by the real writer (fake_capture, test_runtime_costs)."""

from __future__ import annotations

import io
from typing import get_args

import pytest
from fake_capture import FakeCapture
from rich.console import Console
from test_runtime_costs import _snapshot, profiled_capture, twin

from dynscope.analysis import runtime
from dynscope.analysis.compare import compare, comparison_document
from dynscope.analysis.problems import (
    CompileErrorProblem,
    GraphBreakProblem,
    ProblemKind,
    RecompileLimitProblem,
    RecompileProblem,
    SkippedFrameProblem,
)
from dynscope.analysis.run_view import run_view
from dynscope.analysis.summary import summary_document
from dynscope.model import Capture
from dynscope.reporters import REPORTERS, prepare_report
from dynscope.tui.messages import ShowBreak, ShowGuards, ShowStage
from dynscope.tui.overview import OverviewPane, problem_prompt, run_facts


def _every_kind(path):
    """One problem of each kind: a break, a recompiled frame, a compile error, a frame Dynamo
    skipped, and a frame that hit the recompile limit (and was recorded as a recompile)."""
    return (FakeCapture(path)
            .compile("0/0").graph_break("0/0", "Unsupported", line=4, code="print(x)")
            .compile("0/1").recompile("0/1", "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 6")
            .compile("1/0", "g", line=20, fail_type="BackendCompilerFailed", fail_reason="boom")
            .compile("2/0", "h", line=30, fail_type="Unsupported", fail_reason="Dynamo gave up: data dependent")
            .compile("2/1", "h", line=30, fail_type="Unsupported", fail_reason="recompile limit exceeded (cache_size_limit)")
            .recompile("2/1", "2/0: L['n'] == 2")
            .close())


@pytest.fixture
def every_kind(tmp_path):
    with Capture.open(str(_every_kind(tmp_path / "run.dynscope"))) as capture:
        yield capture


def test_each_problem_kind_is_its_own_type_holding_the_views_records(every_kind):
    view = run_view(every_kind)
    problems = view.problems
    assert [type(p) for p in problems] == [CompileErrorProblem, RecompileLimitProblem, SkippedFrameProblem,
                                           GraphBreakProblem, RecompileProblem, RecompileProblem]
    assert {p.kind for p in problems} == set(get_args(ProblemKind))  # every kind, each named once
    error, limit, skipped, brk, *recompiled = problems
    assert isinstance(error, CompileErrorProblem) and error.error is view.errors[0]
    assert isinstance(limit, RecompileLimitProblem) and limit.hit is view.recompile_limit_hits[0]
    assert isinstance(skipped, SkippedFrameProblem) and skipped.frames == tuple(view.skipped_frames)
    assert isinstance(brk, GraphBreakProblem) and brk.group is view.break_groups[0]
    assert [p.recompiles for p in recompiled if isinstance(p, RecompileProblem)] == \
        [f.recompiles for f in view.frame_recompiles]


def test_the_tui_opens_the_screen_of_each_problem_type(every_kind):
    view = run_view(every_kind)
    pane = OverviewPane(every_kind, view.totals, view.problems, hide_volatile=True)
    posted: list[object] = []
    pane.post_message = posted.append  # type: ignore[method-assign]

    class Selected:
        def __init__(self, index: int) -> None:
            self.option = type("Option", (), {"id": str(index)})()

        def stop(self) -> None:
            pass

    for i in range(1, len(view.problems) + 1):
        pane.on_option_list_option_selected(Selected(i))  # type: ignore[arg-type]
    assert [(type(m), getattr(m, "compile_id", None)) for m in posted] == [
        (ShowStage, "1/0"),  # the compile error's stages
        (ShowGuards, "2/1"),  # the limit hit's guards
        (ShowStage, "2/0"),  # the skipped frame's stages
        (ShowBreak, None),
        (ShowGuards, "0/1"),
        (ShowGuards, "2/1"),
    ]
    assert isinstance(posted[3], ShowBreak) and posted[3].event_id == view.break_groups[0].first.event_id


def test_the_html_report_links_each_problem_type_to_its_section(every_kind):
    view = run_view(every_kind)
    recompiled = [r.compile_id for r in view.recompiles]
    assert recompiled == ["0/1", "2/1"]
    ranks = prepare_report("html", [every_kind]).context["ranks"]  # type: ignore[attr-defined]
    assert [(p["kind"], p["anchor"]) for p in ranks[0]["problems"]] == [
        ("error", "r0-errors"),
        ("recompile limit", "r0-recompile-1"),  # the recompile that hit it
        ("skipped frame", "r0-errors"),  # no recorded break made Dynamo skip it
        ("graph break", "r0-break-0"),
        ("recompile", "r0-recompile-0"),
        ("recompile", "r0-recompile-1"),
    ]


_RUNTIME = ("entry_runtimes", "vs_eager", "frame_runtimes", "time_split", "run_vs_eager", "break_costing",
            "recompile_costing")


def test_every_view_reads_the_runtime_the_view_computed_once(tmp_path, monkeypatch):
    calls = dict.fromkeys(_RUNTIME, 0)

    def counting(name, real):
        def counted(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return counted

    for name in _RUNTIME:
        monkeypatch.setattr(runtime, name, counting(name, getattr(runtime, name)))
    path = profiled_capture(tmp_path / "p.dynscope", snapshot=_snapshot(), twin=twin())
    with Capture.open(str(path)) as capture:
        view = run_view(capture)
        for fmt in sorted(REPORTERS):
            prepare_report(fmt, [capture]).render(io.StringIO())
        summary_document(view)
        comparison_document(compare(capture, capture))
        console = Console(file=io.StringIO(), width=100)
        console.print(run_facts(capture, view.totals, hide_volatile=False))
        for i, problem in enumerate(view.problems, 1):
            console.print(problem_prompt(i, problem, capture.run.cwd))
        assert view.time_split is not None and view.vs_eager is not None and view.vs_eager.comparable
        assert len(view.entry_runtimes) == 1 and len(view.costed_breaks) == 1 and len(view.frame_recompiles) == 1
    # one entry point, one break group, one recompiled frame: each computed once for every view
    assert calls == {"entry_runtimes": 1, "vs_eager": 1, "frame_runtimes": 1, "time_split": 1, "run_vs_eager": 1,
                     "break_costing": 1, "recompile_costing": 1}


def test_an_unprofiled_run_has_no_runtime_and_its_problems_no_cost(every_kind):
    view = run_view(every_kind)
    assert not view.profiled and view.time_split is None and view.vs_eager is None
    assert view.entry_runtimes == [] and view.frame_runtimes == []
    assert [b.costing for b in view.costed_breaks] == [None]
    assert [(r.cost_s, r.calls) for r in view.recompile_runtimes] == [(None, None), (None, None)]
    assert all(p.cost_s is None and p.cost_detail is None and p.calls is None for p in view.problems)
