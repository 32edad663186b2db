"""One vocabulary: the summary names compile-time phases as `summary --compile-time` does (one
table, PHASE_LABELS), whether torch logged its timed regions or only its compilation metrics."""

from __future__ import annotations

import io
import re
from pathlib import Path

from dynscope.analysis.overview import stage_label
from dynscope.model import Capture
from dynscope.model.compile_phases import PHASE_LABELS
from dynscope.reporters import ReportOptions
from dynscope.reporters.terminal import TerminalReporter

ROOT = Path(__file__).resolve().parents[2]
INDUCTOR = ROOT / "tests" / "data" / "numerics" / "relu_bug.dynscope"  # timed regions: codegen and C++ apart
OLD_TORCH = ROOT / "tests" / "data" / "captures" / "2.6.0+cu124" / "train_loop_aot_eager.dynscope"  # metrics only


def _summary(path: Path, *, compile_time: bool) -> str:
    out = io.StringIO()
    with Capture.open(str(path)) as capture:
        TerminalReporter.prepare([capture], ReportOptions(compile_time=compile_time)).render(out)
    return out.getvalue()


def _names(line: str) -> list[str]:
    """'Compile time 44.49 s: Dynamo tracing 0.61 s · ...' -> ['Dynamo tracing', ...]."""
    return [re.sub(r" [\d.]+( s| ms|)( \(\d+%\))?$", "", part) for part in line.split(": ", 1)[1].split(" · ")]


def test_the_summary_and_compile_time_name_phases_alike():
    text = _summary(INDUCTOR, compile_time=True)
    headline = next(line for line in text.splitlines() if line.startswith("Compile time "))
    names = _names(headline)
    assert "code generation" in names and "C++/Triton compilation" in names and "codegen" not in names
    assert set(names) <= set(PHASE_LABELS.values())
    by_phase = text.split("Compile time by phase", 1)[1]
    assert all(f"{name} " in by_phase for name in names)


def test_metrics_only_stages_are_named_in_the_same_words():
    headline = next(line for line in _summary(OLD_TORCH, compile_time=False).splitlines()
                    if line.startswith("Compile time "))
    assert _names(headline) == ["Dynamo tracing", "AOT dispatch and partition", "backward compile"]
    assert stage_label("codegen") == "code generation + C++/Triton compilation"
    assert stage_label("inductor") == "Inductor passes + Inductor lowering + Inductor scheduling"


BREAKS = ROOT / "tests" / "data" / "captures" / "2.13.0+cpu" / "graph_breaks_eager.dynscope"  # 0/0: 2 attempts


def test_attempts_are_explained_where_shown():
    import html

    from dynscope.analysis.names import ATTEMPTS_MEANING, attempts_note
    from dynscope.reporters.html import HtmlReporter
    from dynscope.tui.navigator import CompileTree, compile_label

    out = io.StringIO()
    with Capture.open(str(BREAKS)) as capture:
        HtmlReporter.prepare([capture], ReportOptions()).render(out)
        first = next(c for c in capture.compiles() if c.compile_id == "0/0")
        label = compile_label(first).plain
        tooltip = CompileTree(capture).tooltip
    page = html.unescape(out.getvalue())
    assert "(2 attempts)" in page and ATTEMPTS_MEANING in page
    note = attempts_note(first.attempts, first.restart_reasons)
    assert note == "2 attempts: Dynamo restarted its analysis once, after: Failed to trace builtin operator"
    assert f'title="{note}"' in page
    assert "2 attempts" in label and tooltip is not None and ATTEMPTS_MEANING[1:] in str(tooltip)
