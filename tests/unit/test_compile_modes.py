"""reduce-overhead's CUDA-graph skips and max-autotune's choices, read from a capture written
by the real writer (no torch, no GPU: tests/gpu records real ones)."""

from __future__ import annotations

import io
import json

from dynscope.analysis.run_view import run_view
from dynscope.analysis.summary import summary_document
from dynscope.model import Capture
from dynscope.reporters import prepare_report
from dynscope.store.writer import CaptureWriter

SKIP = ('skipping cudagraphs due to mutated inputs (1 instances). Found from : \n'
        '   File "/src/prog.py", line 23, in mutates\n    x.add_(1)')


def capture_with_modes(path):
    writer = CaptureWriter(path)
    writer.set_meta(dynscope_version="0", torch_version="2.11.0", cwd="/src", command=["dynscope", "explain", "p.py"],
                    started=1.0, finished=2.0, exit_code=0)
    for cid, name in (("0/0", "mutates"), ("1/0", "matmul")):
        writer.append("dynamo_start", {"dynamo_start": {"stack": []}}, compile_id=cid, attempt=0)
        writer.append("compilation_metrics", {"compilation_metrics": {
            "compile_id": cid, "co_name": name, "co_filename": "/src/prog.py", "co_firstlineno": 20,
            "has_guarded_code": True, "entire_frame_compile_time_s": 1.0}}, compile_id=cid)
    writer.append("dynscope:log:cudagraphs", {}, SKIP)  # at the graph's first call: no compile id
    writer.append("dynscope:autotune", {"op": "mm", "choices_total": 3}, json.dumps({
        "op": "mm", "picked": "triton_mm_2", "choices": [
            {"name": "triton_mm_2", "description": "BLOCK_M=64", "ms": 0.0098},
            {"name": "mm", "description": "cuBLAS", "ms": 0.0112},
            {"name": "triton_mm_0", "description": "", "ms": None}]}), compile_id="1/0", attempt=0)
    writer.close()
    return path


def test_a_first_call_skip_belongs_to_the_compile_of_the_function_it_names(tmp_path):
    with Capture.open(str(capture_with_modes(tmp_path / "m.dynscope"))) as capture:
        [skip] = capture.cudagraph_skips()
        assert skip.compile_id == "0/0" and "mutated inputs" in skip.reason
        doc = summary_document(run_view(capture))
        assert doc["cudagraph_skips"] == [{"compile_id": "0/0", "reason": SKIP}]
        [tuned] = doc["autotune"]
        assert tuned["compile_id"] == "1/0" and tuned["picked"] == "triton_mm_2" and tuned["choices_total"] == 3
        assert [c["ms"] for c in tuned["choices"]] == [0.0098, 0.0112, None]


def test_the_html_report_shows_them_on_their_compiles_rows(tmp_path):
    with Capture.open(str(capture_with_modes(tmp_path / "m.dynscope"))) as capture:
        out = io.StringIO()
        prepare_report("html", [capture]).render(out)
        page = out.getvalue()
    rows = page.split('class="compile-row')
    mutates = next(r for r in rows if "<td>mutates</td>" in r)
    matmul = next(r for r in rows if "<td>matmul</td>" in r)
    assert "CUDA graphs skipped: skipping cudagraphs due to mutated inputs" in mutates
    assert "autotuned mm: picked triton_mm_2 of 3 choices (triton_mm_2 0.0098 ms, mm 0.0112 ms, triton_mm_0 failed)" \
        in matmul
