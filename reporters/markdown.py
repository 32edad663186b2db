"""A compact Markdown report to paste into a GitHub issue.

Plain Markdown plus ``<details>`` only; every string from the capture is escaped, and the
report stops adding items before GitHub's 65,536-character limit (it says what it left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from dynscope.analysis.cache_text import cache_lines
from dynscope.analysis.compile_time import phase_label
from dynscope.analysis.fix_document import FixDocument
from dynscope.analysis.names import command_line, first_line, friendly_function, location, seconds_text
from dynscope.analysis.numerics import NumericsView
from dynscope.analysis.overview import not_understood_line
from dynscope.analysis.run_view import RunView, run_view
from dynscope.model import Capture
from dynscope.reporters import ReportOptions
from dynscope.safe_text import doc_url, markdown_code, markdown_fence, markdown_prose, markdown_text, visible

SIZE_CAP = 60_000
_MAX_ITEMS = 50


class MarkdownReporter:
    """The Markdown is prepared whole (it has a size budget to keep), then written."""

    def __init__(self, text: str) -> None:
        self.text = text

    @classmethod
    def prepare(cls, captures: Sequence[Capture], options: ReportOptions = ReportOptions()) -> MarkdownReporter:
        comparison = options.comparison
        return cls(markdown_report(captures, compile_time=options.compile_time)
                   + ("" if comparison is None else "\n" + comparison_markdown(comparison)))

    def render(self, out: TextIO) -> None:
        out.write(self.text)


def markdown_report(captures: Sequence[Capture], *, size_cap: int = SIZE_CAP, compile_time: bool = False) -> str:
    out = _Budget(size_cap)
    out.add("## torch.compile report (dynscope)\n")
    for capture in captures:
        _capture_section(out, capture, titled=len(captures) > 1)
        if compile_time:
            _compile_time_section(out, run_view(capture))
    if out.omitted:
        out.force(f"\n_{out.omitted} more items were left out to stay under {size_cap:,} characters; "
                  "the HTML report (`dynscope report CAPTURE -o report.html`) has everything._\n")
    return _unrooted(out.text(), [c.run.cwd for c in captures])


def _unrooted(markdown: str, directories: Sequence[str | None]) -> str:
    """The report names files from the directory the program ran in, never by that directory's
    absolute path (a comment on an issue or PR should not carry someone's home directory):
    ``/home/me/proj/model.py`` in torch's texts, the command or a path becomes ``model.py``."""
    for directory in sorted({d.rstrip("/") for d in directories if d and d.startswith("/") and d.strip("/")},
                            key=len, reverse=True):
        for form in dict.fromkeys((directory, visible(directory), markdown_text(directory))):
            markdown = markdown.replace(form + "/", "")
    return markdown


def _compile_time_section(out: _Budget, view: RunView) -> None:
    """Compile time by phase per frame (``report --compile-time``): the phases sum to the frame's time."""
    frames = view.frame_compile_times
    if not frames:
        return
    cwd = view.run.cwd
    out.add("\n#### Compile time by phase\n\n| frame | compile time | phases | costliest modules (estimate) |\n"
            "|---|---:|---|---|\n")
    for f in frames[:_MAX_ITEMS]:
        phases = " · ".join(f"{phase_label(p)} {seconds_text(v)}" for p, v in f.seconds.items())
        modules = ", ".join(f"{code(m.module, cell=True)} {seconds_text(m.seconds)}" for m in f.modules) or "–"
        out.add(f"| {code(friendly_function(f.function), cell=True)} ({text(location(f.file, f.line, cwd))}) "
                f"| {seconds_text(f.total_s)} | {text(phases)} | {modules} |\n")
    out.skip(len(frames) - _MAX_ITEMS)


def _capture_section(out: _Budget, capture: Capture, *, titled: bool) -> None:
    view = run_view(capture)
    run = capture.run
    compiles, groups, recompiles, errors = view.compiles, view.break_groups, view.recompiles, view.errors
    cwd = run.cwd
    if titled:
        out.add(f"\n### Rank {run.rank if run.rank is not None else '?'}\n")
    out.add(f"\ntorch {text(run.torch_version or '?')} · {run.outcome}"
            + (f" · {run.duration_s:.1f} s" if run.duration_s else "")
            + f" · {code(command_line(run.command))}\n")  # (its directory is not named: see _unrooted)
    if capture.exception is not None:
        out.add(f"\nThe program raised **{text(capture.exception.type)}**: {text(first_line(capture.exception.message))}\n")
    if view.alerts:  # a wrong or slow run is not clean, whatever its compiles say: first
        out.add("\n**Needs attention**\n\n" + "".join(
            f"- **{text(a.title)}**" + (f" — {code(location(a.file, a.line, cwd))}" if a.file else "")
            + f": {text(a.detail)}\n" for a in view.alerts))
    t = view.totals
    out.add("\n| frames | compiles | graphs | graph breaks | recompiles | errors | compile time |\n"
            "|---:|---:|---:|---:|---:|---:|---:|\n"
            f"| {t.frames} | {t.compiles} | {t.graphs} | {t.graph_breaks} ({t.distinct_graph_breaks} distinct) "
            f"| {t.recompiles} | {t.errors} | {t.compile_time_s:.2f} s |\n")

    if view.profiled:
        _time_split(out, view)

    if groups:
        ranked = view.breaks_by_cost
        groups, costings = [b.group for b in ranked], [b.costing for b in ranked]
        order = ", most costly first" if view.profiled else ""
        out.add(f"\n#### Graph breaks{order}\n\n")
        for i, (g, costing) in enumerate(zip(groups[:_MAX_ITEMS], costings), 1):
            loc = g.location
            gb = f" ({text(g.gb_id)})" if g.gb_id else ""
            cost = f"**{seconds_text(costing.cost_s)}** " if costing is not None and costing.cost_s is not None else ""
            item = (f"{i}. {cost}**{text(g.headline)}**{gb} ×{g.count} — {code(location(loc.file, loc.line, cwd))} "
                    f"in {code(friendly_function(loc.function))}" + (f": {code(loc.code)}" if loc.code else "") + "\n")
            if costing is not None:
                item += f"   {text(costing.detail)}\n"
            inner = g.first.inner_location  # the break happened inside the stdlib or torch, called from here
            if inner is not None:
                item += (f"   inside {code(location(inner.file, inner.line, cwd))} "
                         f"in {code(friendly_function(inner.function))}\n")
            details = []
            if g.explanation:
                details.append(text(g.explanation))
            details += [f"- **{text(c)}**" for c in g.consequences]
            details += [f"- hint: {text(h)}" for h in g.hints]
            if doc_url(g.doc_link):
                details.append(f"- docs: <{doc_url(g.doc_link)}>")
            elif g.doc_link:
                details.append(f"- docs: {text(g.doc_link)}")
            if g.compile_ids:
                details.append(f"- compiles: {', '.join(code(c) for c in g.compile_ids[:10])}")
            if details:
                item += "   <details><summary>details</summary>\n\n" + "".join(
                    f"   {line}\n" for d in details for line in d.split("\n")) + "\n   </details>\n"
            out.add(item)
        out.skip(len(groups) - _MAX_ITEMS)

    if recompiles:
        profiled = view.profiled
        served = " calls served |" if profiled else ""
        out.add(f"\n#### Recompiles\n\n| function | compile | failed guard | expected | actual |{served}\n"
                f"|---|---|---|---|---|{'---:|' if profiled else ''}\n")
        for version in view.recompile_runtimes[:_MAX_ITEMS]:
            r = version.recompile
            failure = r.failures[0]
            calls = f" {version.calls} |" if version.calls is not None else ""
            out.add(f"| {code(friendly_function(r.function), cell=True)} ({text(location(r.file, r.line, cwd))}) "
                    f"| {code(r.compile_id, cell=True)} | {code(failure.guard or failure.reason, cell=True)} "
                    f"| {code(failure.expected or '?', cell=True)} | {code(failure.actual or '?', cell=True)} |{calls}\n")
        out.skip(len(recompiles) - _MAX_ITEMS)

    hits = view.recompile_limit_hits
    if hits:
        out.add("\n#### Recompile limit hit\n\n")
        for h in hits:
            value = f"{h.limit_name} = {h.limit}" if h.limit is not None else h.limit_name
            out.add(f"- {code(friendly_function(h.function))} ({text(location(h.file, h.line, cwd))}): compile "
                    f"{code(h.compile_id)} hit {code(value)}; from then on, calls that match no cached graph run in eager\n")

    skipped = view.skipped_frames
    if skipped:
        out.add("\n#### Frames that ran in eager\n\nDynamo gave up on them; the program's results are not affected.\n\n")
        for f in skipped[:_MAX_ITEMS]:
            where = f" at {code(location(f.user_file, f.user_line, cwd))}" if f.user_file else ""
            out.add(f"- {code(f.compile_id)} {code(friendly_function(f.function))}: {text(f.headline)}{where}\n")
        out.skip(len(skipped) - _MAX_ITEMS)

    if errors:
        out.add("\n#### Compile errors\n\n")
        for e in errors[:_MAX_ITEMS]:
            out.add(f"- {code(e.compile_id)} {code(friendly_function(e.function))}: **{text(e.fail_type)}** — "
                    f"{text(first_line(e.reason))}\n")
        out.skip(len(errors) - _MAX_ITEMS)

    results = view.minify_results
    if results:
        out.add("\n#### dynscope minify\n\n")
        for m in results:
            out.add(f"- {code(m.compile_id or '?')} {text(m.signature or m.kind or 'failure')}: "
                    f"**{text(m.culprit or 'culprit not found')}**"
                    + (f", op {code(m.op)}" if m.op else "")
                    + (f"; repro ({m.nodes_after} compute nodes, verified in a fresh process) at {code(m.repro)}"
                       if m.verified and m.repro else "; no verified repro") + "\n")

    if view.numerics is not None:
        _numerics(out, view.numerics, cwd)

    fixes = view.fix_results
    if fixes:
        out.add("\n#### dynscope fix: verified fixes\n\n")
        for fix in fixes[:_MAX_ITEMS]:
            where = location(fix.file, fix.line, cwd) if fix.file else "?"
            out.add(f"- {text(fix.detail)} at {code(where)}: {code(fix.remedy)} — **{text(fix.verdict)}**, outputs equal\n")
        out.skip(len(fixes) - _MAX_ITEMS)

    caches = cache_lines(view.caches)
    if caches:  # only where caches were kept (or a run says more): a caches-off run's report is unchanged
        out.add("\n#### Caches\n\n" + "".join(f"- {text(line.strip())}\n" for line in caches))

    if compiles:
        _frame_times(out, view, cwd)
    unread = not_understood_line(view.not_understood)
    if unread:
        out.force(f"\n_{text(unread)}_\n")


def _numerics(out: _Budget, n: NumericsView, cwd: str | None) -> None:
    """What `dynscope numerics` found: the verdict, the first suspect with its kernel and source line, what to try."""
    out.add(f"\n#### dynscope numerics\n\n**{text(n.verdict)}**: {text(n.verdict_line)}\n\n")
    first, problem = n.first_suspect, n.problem
    if first is not None and problem is not None:
        kernel = f", kernel {code(first.kernel)}" if first.kernel else ""
        out.add(f"- first suspect: {code(first.node)} ({code(first.op)}){kernel} in graph {code(first.graph)} "
                f"{text(first.direction)}, node {first.index}: compiled error {first.compiled_error:.3g} vs eager's "
                f"{first.eager_error:.3g}\n")
        line = first.stack[-1].code if first.stack else None
        out.add(f"- at {code(location(problem.file, problem.line, cwd))}"
                + (f" in {code(friendly_function(problem.function))}" if problem.function else "")
                + (f": {code(line.strip())}" if line else "") + "\n")
    out.add(f"- criterion: {text(n.criterion)}\n")
    out.add(f"- {n.suspect_count} suspect, {n.nondeterministic_count} nondeterministic (changed run to run, not blamed)"
            + "".join(f"; {code(v.node)}" for v in n.numerics.nondeterministic[:6]) + "\n")
    if n.growth_nodes:
        out.add("- compiled error grows >10× at " + ", ".join(code(g.node) for g in n.growth_nodes[:12]) + "\n")
    for hint in n.hints:
        out.add(f"- try: {text(hint)}\n")


def _time_split(out: _Budget, view: RunView) -> None:
    profile, split = view.profile, view.time_split
    if profile is None or split is None:
        return
    how = "CUDA events" if profile.method == "cuda_events" else "the host clock"
    out.add(f"\n#### Where the time went ({seconds_text(split.wall_s)} profiled, measured with {how})\n\n"
            "| | time | share |\n|---|---:|---:|\n"
            + "".join(f"| {label} | {seconds_text(value)} | {value / split.wall_s if split.wall_s else 0:.0%} |\n"
                      for label, value in split.parts()))
    overall = view.vs_eager
    if overall is not None:
        if overall.comparable and overall.speedup is not None:
            paid = (f"compiling ({seconds_text(overall.compile_s)}) paid back after {overall.break_even_calls} steps"
                    if overall.break_even_calls is not None else "compiling never pays back")
            out.add(f"\nvs eager: compiled code ran **{overall.speedup:.2f}×**; {paid}.\n")
        else:
            out.add(f"\nvs eager: not comparable: {text(overall.why_not or '?')}\n")


def _frame_times(out: _Budget, view: RunView, cwd: str | None) -> None:
    if not out.add("\n<details><summary>Compile time by frame</summary>\n\n"
                   "| function | where | compiles | total s | dynamo | aot | inductor | codegen | backward |\n"
                   "|---|---|---:|---:|---:|---:|---:|---:|---:|\n"):
        return
    seconds = view.compile_seconds
    by_id = {c.compile_id: c for c in view.compiles}
    frames = sorted(view.frames, key=lambda f: -sum(seconds[c] for c in f.compile_ids))
    for frame in frames[:_MAX_ITEMS]:
        cs = [by_id[c] for c in frame.compile_ids]
        cols = [sum(getattr(c.times, a) or 0 for c in cs) for a in ("dynamo", "aot_autograd", "inductor", "codegen", "backward")]
        out.add(f"| {code(friendly_function(frame.function), cell=True)} | {text(location(frame.file, frame.line, cwd))} "
                f"| {len(cs)} | {sum(seconds[c.compile_id] for c in cs):.2f} | " + " | ".join(f"{v:.2f}" for v in cols) + " |\n")
    out.skip(len(frames) - _MAX_ITEMS)
    out.force("\n</details>\n")


class _Budget:
    """Collect parts until the size cap; count what did not fit.

    Once a part does not fit, nothing more is added (a smaller table row must not land
    under a table header that was left out)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.size = 0
        self.omitted = 0
        self.full = False
        self._reserve = 400  # room for the closing note and </details>

    def add(self, part: str) -> bool:
        """Add the part if it fits; say whether it did."""
        if self.full or self.size + len(part) > self.cap - self._reserve:
            self.full = True
            self.omitted += 1
            return False
        self.force(part)
        return True

    def force(self, part: str) -> None:
        self.parts.append(part)
        self.size += len(part)

    def skip(self, count: int) -> None:
        self.omitted += max(count, 0)

    def text(self) -> str:
        return "".join(self.parts)


# The Markdown escaping rule is dynscope.safe_text's, like every other output's; what torch's own
# prose puts in backticks stays code.
text = markdown_prose
code = markdown_code


def comparison_markdown(result) -> str:
    """Two runs compared, for a pull request or an issue comment (dynscope compare --md)."""
    from dynscope.analysis.changes import comparison_lines

    before, after = result.before.run, result.after.run
    rows = [f"## torch.compile: {text(before.path)} → {text(after.path)} (dynscope)\n"]
    if before.torch_version != after.torch_version:
        rows.append(f"torch {text(before.torch_version or '?')} → {text(after.torch_version or '?')}\n")
    # A line's sign stays a sign, not a nested list item.
    rows += [f"- {text(line).replace('-', chr(92) + '-', 1) if line.startswith('-') else text(line)}"
             for line in comparison_lines(result)]
    return "\n".join(rows) + "\n"


def render_fix_markdown(doc: FixDocument) -> str:
    """A ``dynscope.fix/2`` document as an issue or pull-request comment."""
    from dynscope.analysis.fix_document import FIX_COLUMNS, combined_numbers, fix_cells, run_conditions

    base = doc.baseline.metrics
    lines = ["## dynscope fix\n",
             f"Baseline: {base and base.graph_breaks} graph breaks, {base and base.recompiles} recompiles, "
             f"{base and base.errors} errors; {doc.runs} runs in {doc.wall_s} s "
             f"(torch {text(str(doc.torch_version))}).\n",
             text(run_conditions(doc)) + ".\n"]
    eager = doc.baseline.eager
    if eager is not None and eager.differs:
        lines.insert(1, f"**Compiled ≠ eager:** {text(eager.message)}.\n")
    if doc.trials:
        lines.append("| " + " | ".join(FIX_COLUMNS) + " |")
        lines.append("|" + "---|" * len(FIX_COLUMNS))
        for row in doc.trials:
            cells = fix_cells(row)
            lines.append("| " + " | ".join(code(cells[c], cell=True) if c == "remedy" else
                                           text(cells[c]).replace("|", "\\|") for c in FIX_COLUMNS) + " |")
    combined = doc.combined
    if combined:
        # One remedy serving two problems was proven for each: it is named once.
        lines.append(f"\n**Combined** ({text(', '.join(dict.fromkeys(combined.remedies)))}): "
                     f"**{text(combined.verdict)}**, {text(combined_numbers(doc, combined))}.\n")
        if combined.verdict in ("fixed", "improved"):
            patch = combined.patch
            fence = markdown_fence(patch)
            language = "diff" if patch.startswith("--- ") else "python"
            lines.append(f"The change to make:\n\n{fence}{language}\n{visible(patch.rstrip())}\n{fence}\n")
    return "\n".join(lines) + "\n"
