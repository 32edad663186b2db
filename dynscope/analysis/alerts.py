"""Findings about the run as a whole that are not compile problems, but still mean "not clean".

A compile can be free of graph breaks, recompiles and errors and the run still be wrong or
slow: ``dynscope numerics`` found where compiled and eager part ways, or a ``--vs-eager`` run
measured the compiled code at 0.72× eager's speed (compiling never pays back). Every overview
(terminal summary, TUI, HTML, Markdown, notebook) leads with these, and none calls such a run
clean: ``RunView.clean`` is the one place that decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dynscope.analysis.names import plural, seconds_text
from dynscope.analysis.numerics import NumericsView
from dynscope.analysis.runtime import VsEager
from dynscope.model.numerics import node_site

AlertKind = Literal["numerics_suspect", "slower_than_eager"]


@dataclass(frozen=True)
class RunAlert:
    kind: AlertKind
    title: str  # one line: "numerics suspect: compiled and eager part ways at relu (aten.relu.default)"
    detail: str  # the evidence in one line
    file: str | None = None  # where in the user's code (numerics: the first suspect's line)
    line: int | None = None


def run_alerts(numerics: NumericsView | None, vs_eager: VsEager | None) -> list[RunAlert]:
    """The run's alerts, numerics first (a wrong result outweighs a slow one)."""
    alerts = []
    if numerics is not None and numerics.verdict == "suspect":
        alerts.append(numerics_alert(numerics))
    if not_faster_than_eager(vs_eager):
        assert vs_eager is not None and vs_eager.speedup is not None
        alerts.append(slower_alert(vs_eager, vs_eager.speedup))
    return alerts


def numerics_alert(n: NumericsView) -> RunAlert:
    first = n.first_suspect
    if first is None:
        return RunAlert("numerics_suspect", f"numerics suspect: {n.verdict_line}", n.criterion)
    site = node_site(first)
    return RunAlert("numerics_suspect", f"numerics suspect: compiled and eager part ways at {first.node} ({first.op})",
                    f"{plural(n.suspect_count, 'suspect node')}; compiled error {first.compiled_error:.3g} "
                    f"against eager's {first.eager_error:.3g} (dynscope numerics)", site.file, site.line)


def not_faster_than_eager(v: VsEager | None) -> bool:
    """A --vs-eager run whose compiled steps are no faster than eager's: compiling never pays back."""
    return v is not None and v.comparable and v.speedup is not None and v.break_even_calls is None


def slower_alert(v: VsEager, speedup: float) -> RunAlert:
    slower = "slower than" if speedup < 1 else "no faster than"
    return RunAlert("slower_than_eager", f"compiled ran {slower} eager: {speedup:.2f}× eager's speed",
                    f"compiling ({seconds_text(v.compile_s)}) never pays back: a compiled step takes "
                    f"{seconds_text(v.compiled_per_call_s or 0.0)}, an eager one "
                    f"{seconds_text(v.eager_per_call_s or 0.0)} (--vs-eager)")


def clean_line(alerts: list[RunAlert]) -> str:
    """What an overview says where it lists no compile problem: "No problems found" only when nothing
    else is wrong either."""
    if not alerts:
        return "No problems found"
    found = "the finding above needs" if len(alerts) == 1 else f"the {len(alerts)} findings above need"
    return f"No compile problems, but {found} attention"
