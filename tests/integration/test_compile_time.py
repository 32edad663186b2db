"""Compile time by phase on a real Inductor compile: the phases torch timed sum to its measured
total within 5%, and the costliest modules are the model's own."""

from __future__ import annotations

import pytest

from dynscope.analysis.run_view import run_view
from dynscope.analysis.summary import summary_document
from dynscope.model import Capture


def test_an_inductor_compile_splits_into_phases_that_sum_to_its_total(make_capture):
    with Capture.open(str(make_capture("conv_net.py", "--backend", "inductor"))) as capture:
        view = run_view(capture)
        [t] = view.compile_times
        c = capture.compile(t.compile_id)
        assert t.phase_sum_s == pytest.approx((c.times.total or 0.0) + (c.times.backward or 0.0), rel=0.05)
        phases = dict(t.phases.seconds)
        assert {"dynamo", "aot", "lowering", "scheduling", "codegen", "compile", "backward"} <= set(phases)
        assert {m.module for m in t.modules} == {"self.conv", "self.bn", "self.head"}
        doc = summary_document(view, compile_time=True)["compile_phases"]
        assert doc["compiles"][0]["phases"] == {p: round(s, 6) for p, s in t.phases.seconds}
        assert "compile_phases" not in summary_document(view)
