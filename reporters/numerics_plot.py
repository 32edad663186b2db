"""The error along each graph, laid out for the HTML report's inline SVG (templates/numerics.html.j2).

Only geometry: where each node's marks go. x is the node's order in its graph, y is log10 of its
error against the reference (compiled and eager); the template draws it, and autoescaping makes
every name from the capture text. An error that is not a finite number is drawn at the top edge
and said so in its tooltip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dynscope.analysis.numerics import ErrorPoint, ErrorSeries, NumericsView

WIDTH, HEIGHT = 760.0, 240.0
LEFT, RIGHT, TOP, BOTTOM = 56.0, 14.0, 18.0, 34.0
MAX_NODES = 2000  # per series drawn; the rest is counted under the plot


@dataclass(frozen=True)
class PlotPoint:
    x: float
    compiled_y: float
    eager_y: float
    index: int
    node: str
    op: str
    kernel: str
    source: str
    compiled: str  # the errors as text, for the tooltip and the table
    eager: str
    suspect: bool
    first_suspect: bool
    growth: bool
    nondeterministic: bool


@dataclass(frozen=True)
class Tick:
    y: float
    label: str


@dataclass(frozen=True)
class Plot:
    label: str
    width: float
    height: float
    left: float
    right: float  # x of the plot's right edge
    top: float
    bottom: float  # y of the plot's bottom edge
    points: tuple[PlotPoint, ...]
    ticks: tuple[Tick, ...]
    compiled_line: str  # SVG polyline points
    eager_line: str
    left_out: int  # nodes past MAX_NODES, not drawn

    @property
    def first_suspect(self) -> PlotPoint | None:
        return next((p for p in self.points if p.first_suspect), None)


def plots(view: NumericsView) -> list[Plot]:
    return [_plot(series) for series in view.series]


def _plot(series: ErrorSeries) -> Plot:
    shown = series.points[:MAX_NODES]
    values = [v for p in shown for v in (p.compiled_log10, p.eager_log10) if v is not None]
    low = math.floor(min(values)) if values else -12
    high = math.ceil(max(values)) if values else 0
    if high <= low:
        high = low + 1
    right, bottom = WIDTH - RIGHT, HEIGHT - BOTTOM
    step = (right - LEFT) / max(len(shown) - 1, 1)

    def y_of(value: float | None) -> float:
        if value is None:  # inf or nan: at the top edge
            return TOP
        return bottom - (value - low) / (high - low) * (bottom - TOP)

    points = tuple(_point(p, LEFT + i * step if len(shown) > 1 else (LEFT + right) / 2, y_of(p.compiled_log10),
                          y_of(p.eager_log10)) for i, p in enumerate(shown))
    every = max(1, math.ceil((high - low) / 8))
    ticks = tuple(Tick(y_of(float(d)), f"1e{d}") for d in range(low, high + 1, every))
    return Plot(series.label, WIDTH, HEIGHT, LEFT, right, TOP, bottom, points, ticks,
                " ".join(f"{p.x:.1f},{p.compiled_y:.1f}" for p in points),
                " ".join(f"{p.x:.1f},{p.eager_y:.1f}" for p in points),
                len(series.points) - len(shown))


def _point(p: ErrorPoint, x: float, compiled_y: float, eager_y: float) -> PlotPoint:
    n = p.node
    return PlotPoint(x, compiled_y, eager_y, n.index, n.node, n.op, n.kernel, n.source, _error_text(n.compiled_error),
                     _error_text(n.eager_error), n.suspect, p.first_suspect, p.growth, n.nondeterministic)


def _error_text(error: float) -> str:
    return f"{error:.3g}" if math.isfinite(error) else f"{error} (not a finite number)"
