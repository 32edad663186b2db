"""`explain --profile` on an NVIDIA GPU: device times, CUDA-graph skips and autotuning choices.

Skipped without CUDA. Run on the GPU machine (torch 2.11 + Triton there).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with Triton")

from conftest import run_dynscope  # noqa: E402

PROGRAM = str(Path(__file__).resolve().parent.parent / "programs" / "gpu_modes.py")


def explain(tmp_path, mode: str, *options: str):
    out = tmp_path / f"{mode}.dynscope"
    run = run_dynscope("explain", "-q", *options, "-o", str(out), PROGRAM, mode)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run_dynscope("summary", "--json", str(out)).stdout)
    text = run_dynscope("summary", str(out), env={"COLUMNS": "200"})
    html = tmp_path / f"{mode}.html"
    assert run_dynscope("report", str(out), "-o", str(html)).returncode == 0
    return json.loads(run.stdout.splitlines()[-1]), doc, text.stdout + text.stderr + html.read_text()


def test_device_times_of_a_kernel_agree_with_the_profiler(tmp_path):
    own, doc, text = explain(tmp_path, "kernel", "--profile")
    runtime = doc["runtime"]
    assert runtime["method"] == "cuda_events" and "CUDA events" in text
    [frame] = [f for f in runtime["frames"] if f["function"] == "pointwise"]
    assert frame["calls"] == own["calls"]
    per_call = frame["steady_per_call_s"]  # the first call also loads and benchmarks the kernel
    print(f"dynscope {per_call * 1e3:.4f} ms a call, torch.profiler {own['profiler_kernel_s_per_call'] * 1e3:.4f} ms")
    assert per_call == pytest.approx(own["profiler_kernel_s_per_call"], rel=0.2)


def test_reduce_overhead_shows_why_cuda_graphs_were_skipped(tmp_path):
    _, doc, text = explain(tmp_path, "reduce-overhead", "--profile")
    reasons = [k["reason"] for k in doc["cudagraph_skips"]]
    print(reasons)
    assert any("mutated inputs" in r for r in reasons)
    assert text.count("CUDA graphs skipped") >= 2 and "mutated inputs" in text  # the summary and the report


def test_max_autotune_shows_its_choices_and_the_one_picked(tmp_path):
    _, doc, text = explain(tmp_path, "max-autotune")
    tuned = doc["autotune"]
    print(json.dumps(tuned[:1], indent=1)[:2000])
    assert tuned and tuned[0]["op"] and tuned[0]["picked"] == tuned[0]["choices"][0]["name"]
    timed = [c["ms"] for c in tuned[0]["choices"] if c["ms"] is not None]
    assert timed == sorted(timed) and len(tuned[0]["choices"]) > 1
    assert "Autotuning" in text and f"picked {tuned[0]['picked']}" in text
    assert f"autotuned {tuned[0]['op']}: picked {tuned[0]['picked']}" in text  # with its compile in the report


def test_reduce_overhead_counts_recordings_and_replays(tmp_path):
    own, doc, text = explain(tmp_path, "cudagraphs", "--profile")
    print(doc["runtime"]["cudagraphs"])
    [counts] = doc["runtime"]["cudagraphs"]
    assert counts["compile_id"] == "0/0" and counts["recordings"] == 1
    assert counts["warmups"] + counts["recordings"] + counts["replays"] == own["calls"]
    assert f"{counts['replays']} replays" in text
