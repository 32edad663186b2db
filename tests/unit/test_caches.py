"""The compile caches explained, on captures recorded with caches on (no torch).

tests/data/caches/<torch version>/ holds what tests/data/caches/record.sh recorded of
examples/warm_start.py: ``explain --warm`` (warm.dynscope, with warm.cold.dynscope beside it), a
run that compiles, changes one Inductor setting (comment_origin) and compiles again
(changed.dynscope), and a run that loads the portable cache artifacts first (loaded.dynscope).
The facts asserted come from what the example does, not from a snapshot of the captures.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
from fake_capture import FakeCapture

from dynscope.analysis.cache_compare import compare_caches
from dynscope.analysis.caches import cache_report
from dynscope.analysis.compare import compare, comparison_document
from dynscope.analysis.run_view import run_view
from dynscope.analysis.summary import summary_document
from dynscope.commands import main
from dynscope.model import Capture
from dynscope.model.caches import KeyComponent, key_changes, parse_components

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "caches"
VERSIONS = sorted(p.name for p in DATA.iterdir() if p.is_dir() and any(p.glob("*.dynscope")))
CACHES_OFF = ROOT / "tests" / "data" / "captures" / "2.13.0+cpu" / "conv_net_inductor.dynscope"
SETTING = "inductor_config[comment_origin]"


@pytest.fixture(params=VERSIONS)
def data(request) -> Path:
    return DATA / request.param


def _open(path: Path) -> Capture:
    return Capture.open(str(path))


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def test_a_cold_run_misses_every_layer_and_logs_each_key(data):
    with _open(data / "warm.cold.dynscope") as cold:
        lookups = cold.cache_lookups()
        assert {(x.layer, x.state) for x in lookups} == {("aotautograd", "miss"), ("fx_graph", "miss")}
        assert all(x.components for x in lookups)  # AOTAutograd's key details too: dynscope turned them on
        names = {c.name for x in lookups for c in x.components}
        assert SETTING in names and "torch_version" in names
        report = cache_report(cold)
        assert report.kept and report.misses == 2 and report.warm is None
        assert all(o.compared_with is None and not o.changes for o in report.outcomes)  # nothing earlier


def test_a_warm_run_hits_every_layer_and_says_what_it_saved(data):
    with _open(data / "warm.dynscope") as warm:
        report = cache_report(warm)
        assert {(o.layer, o.state) for o in report.outcomes} == {("aotautograd", "hit"), ("fx_graph", "hit")}
        assert all(o.saved_s is not None and o.saved_s > 0 for o in report.outcomes)
        w = report.warm
        assert w is not None and w.cold_found and w.cold_capture == "warm.cold.dynscope"
        (frame,) = w.frames
        assert frame.function == "scaled_gelu" and frame.file == "warm_start.py"
        assert frame.cold_s is not None and frame.warm_s is not None and frame.warm_s < frame.cold_s
        assert w.cold_compile_s == pytest.approx(frame.cold_s)


def test_a_changed_setting_is_named_as_the_reason_for_the_miss(data):
    with _open(data / "changed.dynscope") as changed:
        report = cache_report(changed)
        misses = [o for o in report.outcomes if o.state == "miss"]
        assert len(misses) == 4  # two compiles, each missing both layers
        explained = [o for o in misses if o.changes]
        assert {o.layer for o in explained} == {"aotautograd", "fx_graph"}
        for o in explained:  # the setting alone: the graph, the inputs and torch are the same
            assert [(c.component, c.before, c.after) for c in o.changes] == [(SETTING, "False", "True")]
            assert o.compared_with == "an earlier 0/0"  # torch._dynamo.reset() starts compile ids again
        assert report.changed_components == [SETTING]


def test_the_portable_cache_artifacts_are_recognised(data):
    with _open(data / "warm.cold.dynscope") as cold:
        (saved,) = cold.portable_cache_calls()
        assert saved.op == "save" and saved.size_bytes and saved.size_bytes > 0
        assert saved.artifacts.get("inductor", 0) >= 1 and saved.artifacts.get("aot_autograd", 0) >= 1
    with _open(data / "loaded.dynscope") as loaded:
        (load,) = loaded.portable_cache_calls()
        assert load.op == "load" and load.size_bytes == saved.size_bytes
        assert load.artifacts == saved.artifacts
        # what it loaded filled the fresh cache directory: every layer hits
        assert {x.state for x in loaded.cache_lookups()} == {"hit"}


def test_summary_json_has_the_caches_field_only_where_caches_were_kept(data):
    with _open(data / "changed.dynscope") as changed:
        doc = json.loads(json.dumps(summary_document(run_view(changed))))
    caches = doc["caches"]
    assert caches["kept"] is True and (caches["hits"], caches["misses"], caches["bypasses"]) == (0, 4, 0)
    assert caches["changed_components"] == [SETTING]
    explained = [x for x in caches["lookups"] if x["changes"]]
    assert explained and all(x["changes"] == [{"component": SETTING, "before": "False", "after": "True"}]
                             for x in explained)
    with _open(CACHES_OFF) as off:
        assert "caches" not in summary_document(run_view(off))


def test_terminal_and_markdown_show_the_caches(data):
    code, text = _run("summary", str(data / "warm.dynscope"))
    assert code == 0
    assert "Caches: 2 hits, 0 misses, 0 bypasses" in text
    assert "warm start: compile" in text and "scaled_gelu (warm_start.py)" in text
    code, text = _run("summary", str(data / "changed.dynscope"))
    assert f"{SETTING}: False → True (vs an earlier 0/0)" in text
    code, md = _run("report", "--format", "md", str(data / "loaded.dynscope"))
    assert "#### Caches" in md and "load\\_cache\\_artifacts" in md


def test_compare_names_the_key_components_that_changed(data):
    with _open(data / "warm.cold.dynscope") as before, _open(data / "changed.dynscope") as after:
        result = compare_caches(before, after)
        assert result is not None and result.components == [SETTING]
        assert (result.before["miss"], result.after["miss"]) == (2, 4)
        doc = comparison_document(compare(before, after))
        assert doc["caches"]["changed_components"] == [SETTING]
    code, text = _run("compare", str(data / "warm.cold.dynscope"), str(data / "changed.dynscope"))
    assert code == 0 and f"cache key of scaled_gelu (fx_graph): {SETTING}: False → True" in text
    with _open(CACHES_OFF) as a, _open(CACHES_OFF) as b:  # caches off on both sides: nothing to say
        assert compare_caches(a, b) is None and "caches" not in comparison_document(compare(a, b))


def test_check_gates_on_cache_misses(data):
    changed, warm = str(data / "changed.dynscope"), str(data / "warm.dynscope")
    assert _run("check", "--max-cache-misses", "3", changed)[0] == 1
    assert _run("check", "--max-cache-misses", "4", changed)[0] == 0
    code, text = _run("check", "--baseline", warm, "--", changed)
    assert code == 1 and "4 cache misses (baseline: 0)" in text and SETTING in text
    assert _run("check", "--baseline", changed, "--", warm)[0] == 0  # fewer misses than the baseline


def test_check_says_when_caches_were_off():
    code, text = _run("check", "--max-cache-misses", "0", str(CACHES_OFF))
    assert code == 0 and "caches were off while recording (explain without --cold, or --warm, shows them)" in text


def test_a_warm_capture_without_its_cold_run_says_so(data, tmp_path):
    shutil.copy(data / "warm.dynscope", tmp_path / "warm.dynscope")
    with _open(tmp_path / "warm.dynscope") as warm:
        w = cache_report(warm).warm
        assert w is not None and not w.cold_found and w.cold_compile_s is None


def test_key_components_parse_and_diff():
    lines = ("[aaa] gm: <lambda>()\n\n\ndef forward(self, x):\n    return x",
             "[bbb] inductor_config[max_autotune]: False",
             "[ccc] example_inputs[0]: TensorMetadata(shape=[4])",
             "not a component line")
    parsed = parse_components(lines)
    assert [c.name for c in parsed] == ["gm", "inductor_config[max_autotune]", "example_inputs[0]"]
    assert parsed[0].value.endswith("return x") and parsed[1].digest == "bbb"
    later = (KeyComponent("gm", "aaa", "same"), KeyComponent("inductor_config[max_autotune]", "ddd", "True"),
             KeyComponent("torch_version", "eee", "2.13"))
    changes = key_changes(parsed, later)
    assert [(c.component, c.before, c.after) for c in changes] == [
        ("inductor_config[max_autotune]", "False", "True"), ("torch_version", None, "2.13"),
        ("example_inputs[0]", "TensorMetadata(shape=[4])", None)]


def test_a_cache_artifact_torch_wrote_otherwise_is_counted_not_understood(tmp_path):
    fake = FakeCapture(tmp_path / "run.dynscope")
    fake.compile("0/0")
    fake.writer.append("artifact:fx_graph_cache_miss", {"artifact": {"name": "fx_graph_cache_miss", "encoding": "json"}},
                       "not json", compile_id="0/0", attempt=0)
    fake.writer.append("artifact:aotautograd_cache_bypass",
                       {"artifact": {"name": "aotautograd_cache_bypass", "encoding": "json"}},
                       json.dumps({"cache_state": "bypass", "cache_bypass_reason": "Cannot cache a graph with x",
                                   "components": []}), compile_id="0/0", attempt=0)
    with _open(fake.close()) as capture:
        report = cache_report(capture)
        (bypass,) = report.outcomes
        assert (bypass.layer, bypass.state, bypass.bypass_reason) == ("aotautograd", "bypass", "Cannot cache a graph with x")
        assert "artifact:fx_graph_cache_miss" in capture.not_understood()


def _fake_run(path: Path, components: list[str], *, warm_of: str | None = None) -> Path:
    fake = FakeCapture(path)
    fake.writer.set_meta(keep_caches=True)
    fake.compile("0/0", "forward")
    fake.writer.append("artifact:fx_graph_cache_miss", {"artifact": {"name": "fx_graph_cache_miss", "encoding": "json"}},
                       json.dumps({"cache_state": "miss", "key": "k", "components": components}),
                       compile_id="0/0", attempt=0)
    if warm_of is not None:
        from dynscope import events

        events.write(fake.writer, events.WarmStart(cold_capture=warm_of, cold_exit_code=0))
    return fake.close()


def test_a_warm_runs_miss_is_explained_against_the_cold_runs_entry(tmp_path):
    common = ["[g1] gm: def forward(self, x): return x", "[t1] torch_version: 2.13"]
    _fake_run(tmp_path / "run.cold.dynscope", [*common, "[c1] example_inputs[0]: TensorMetadata(shape=[4])"])
    warm = _fake_run(tmp_path / "run.dynscope", [*common, "[c2] example_inputs[0]: TensorMetadata(shape=[8])"],
                     warm_of="run.cold.dynscope")
    with _open(warm) as capture:
        (miss,) = cache_report(capture).outcomes
        assert miss.compared_with == "cold run 0/0"
        assert [(c.component, c.before, c.after) for c in miss.changes] == [
            ("example_inputs[0]", "TensorMetadata(shape=[4])", "TensorMetadata(shape=[8])")]


def test_a_warm_start_names_only_a_file_beside_it(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    _fake_run(tmp_path / "elsewhere" / "cold.dynscope", ["[a] gm: x"])
    warm = _fake_run(tmp_path / "run.dynscope", ["[b] gm: y"], warm_of="elsewhere/cold.dynscope")
    with _open(warm) as capture:  # a path in the capture is not followed: only its file name, beside the capture
        report = cache_report(capture)
        assert report.warm is not None and not report.warm.cold_found
        assert report.outcomes[0].compared_with is None


def test_a_cold_run_that_failed_is_said(tmp_path):
    _fake_run(tmp_path / "run.cold.dynscope", ["[a] gm: x"])
    warm = _fake_run(tmp_path / "run.dynscope", ["[a] gm: x"], warm_of="run.cold.dynscope")
    from dynscope import events
    from dynscope.store.writer import CaptureWriter

    writer = CaptureWriter.reopen(warm)  # a second warm_start event: the last one counts
    events.write(writer, events.WarmStart(cold_capture="run.cold.dynscope", cold_exit_code=1))
    writer.close()
    code, text = _run("summary", str(warm))
    assert code == 0 and "(cold run: run.cold.dynscope; the cold run exited 1)" in text
    with _open(warm) as capture:
        assert summary_document(run_view(capture))["caches"]["warm"]["cold_exit_code"] == 1
