"""Import fidelity: a TORCH_TRACE log imported gives what `dynscope explain` of the same run gives.

One run serves both sides: `dynscope explain` with TORCH_TRACE set writes the capture
(dynscope's probes) and torch's own log side by side; the log is then imported.
"""

from __future__ import annotations

from pathlib import Path

from conftest import EXAMPLES, run_dynscope

from dynscope.analysis.breaks import group_breaks
from dynscope.model import Capture

# What a TORCH_TRACE log cannot hold: bytecode of non-resume frames and the scheduler IR come from
# artifact logs only dynscope's probes turn on.
NOT_IN_A_LOG = {"bytecode", "scheduler_ir"}


def explained_and_imported(tmp_path: Path, example: str, *args: str) -> tuple[Capture, Capture]:
    logs = tmp_path / "logs"
    explained, imported = tmp_path / "explained.dynscope", tmp_path / "imported.dynscope"
    result = run_dynscope("explain", "--cold", "-q", "-o", str(explained), str(EXAMPLES / example), *args,
                          env={"TORCH_TRACE": str(logs)})
    assert result.returncode == 0, result.stderr[-3000:]
    result = run_dynscope("import", str(logs), "-o", str(imported))
    assert result.returncode == 0, result.stderr
    assert "events from 1 file" in result.stderr and "unreadable" not in result.stderr
    return Capture.open(str(explained)), Capture.open(str(imported))


def same_compiles_breaks_recompiles_and_stages(a: Capture, b: Capture) -> None:
    assert [(c.compile_id, c.function, c.file, c.line, c.status, c.attempts, c.graph_op_count)
            for c in b.compiles()] == \
           [(c.compile_id, c.function, c.file, c.line, c.status, c.attempts, c.graph_op_count) for c in a.compiles()]
    assert [(g.gb_type, g.gb_id, g.location.file, g.location.line, g.location.function, g.count, g.compile_ids,
             g.resumed_into, g.hints, g.explanation) for g in group_breaks(b.graph_breaks())] == \
           [(g.gb_type, g.gb_id, g.location.file, g.location.line, g.location.function, g.count, g.compile_ids,
             g.resumed_into, g.hints, g.explanation) for g in group_breaks(a.graph_breaks())]
    assert [(r.compile_id, r.function, r.reason, [f.reason for f in r.failures]) for r in b.recompiles()] == \
           [(r.compile_id, r.function, r.reason, [f.reason for f in r.failures]) for r in a.recompiles()]
    for c in a.compiles():
        explained = set(a.recorded_stage_names(c.compile_id))
        imported = set(b.recorded_stage_names(c.compile_id))
        assert imported <= explained and explained - imported <= NOT_IN_A_LOG, c.compile_id


def test_graph_breaks_example(tmp_path):
    a, b = explained_and_imported(tmp_path, "graph_breaks.py", "--backend", "eager")
    with a, b:
        assert len(a.graph_breaks()) == 4
        same_compiles_breaks_recompiles_and_stages(a, b)


def test_recompiles_example_with_aot_stages(tmp_path):
    a, b = explained_and_imported(tmp_path, "recompiles.py", "--backend", "aot_eager")
    with a, b:
        assert a.recompiles() and any("aot_" in s for c in a.compiles() for s in a.recorded_stage_names(c.compile_id))
        same_compiles_breaks_recompiles_and_stages(a, b)
        # The recompile's guard text is in the log; the probe's structured guard failure is not.
        assert b.run.probes["guard_failures"] is False


def test_train_loop_and_conv_net_with_backward_stages(tmp_path):
    for example in ("train_loop.py", "conv_net.py"):
        (tmp_path / example).mkdir()
        a, b = explained_and_imported(tmp_path / example, example, "--backend", "aot_eager")
        with a, b:
            assert any("aot_backward" in a.recorded_stage_names(c.compile_id) for c in a.compiles()), example
            same_compiles_breaks_recompiles_and_stages(a, b)
