"""minify never executes what a capture says (issue 20, item 1), without torch.

The parts that decide what may run are torch-free, so they are checked here: graph_ops' table
(what a target or method may be), graph_check (names made plain, structure checked),
replay_settings (which recorded settings are applied) and repro_check (repro.py checked with
ast). `dynscope minify --from` refuses a hostile graph in the parent process, before any worker
starts: those attacks run the real CLI here, on captures written by the real writer.
tests/integration/test_security_minify.py forges real recorded captures and runs the attacks
that get as far as torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_minify import graph_capture, node, rename, sin_graph

from dynscope.minifier import graph_ops, replay_settings
from dynscope.minifier.case import case_from_failure
from dynscope.minifier.fragment import Fragment
from dynscope.minifier.graph_check import GraphError, checked_graph, checked_inputs
from dynscope.minifier.repro import ReproSpec, render
from dynscope.minifier.repro_check import problem

REPO = Path(__file__).resolve().parents[2]
HOSTILE_NAME = "l_x_=__import__('os').system('touch {marker}')"
CONTROL = set(range(0, 32)) - {9, 10, 13} | {127} | set(range(0x80, 0xA0))


def run_minify(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dynscope", "minify", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def assert_refused(proc: subprocess.CompletedProcess, *words: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert lines and lines[-1].startswith("dynscope: ") and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len([line for line in lines if not line.endswith("…")]) == 1, proc.stderr  # progress lines end in …
    for word in words:
        assert word in lines[-1], lines[-1]
    assert not any(ord(c) in CONTROL for c in proc.stderr + proc.stdout)


# -- the table -------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", [
    "torch.os.system", "torch.builtins.exec", "torch.builtins.eval", "torch._C._dynamo.eval_frame.os.system",
    "torch.nn.modules.module.torch.os.system", "torch.load", "torch.save", "torch.from_file", "torch.hub.load",
    "torch.utils.cpp_extension.load_inline", "torch.ops.load_library", "torch.__builtins__", "torch.sin.__globals__",
    "torch._C._jit_set_profiling_executor", "torch.ops.aten.from_file.default", "torch.ops.aten.save.default",
    "torch.ops.higher_order.cond", "torch.ops.aten.__class__.__init__", "torch.ops.myns.evil.default",
    "__import__", "builtins.__import__", "builtins.eval", "exec", "getattr", "builtins.open", "os.system",
    "subprocess.run", "_operator.call", "operator.attrgetter", "operator.methodcaller", "math.factorial",
    "torch.compile", "torch.jit.load", "torch.cuda.jiterator._create_jit_fn", 42, None,
])
def test_the_table_refuses_what_could_run_code_or_touch_files(target):
    assert graph_ops.target_refusal(target) is not None


@pytest.mark.parametrize("target", [
    "torch.sin", "torch._C._nn.linear", "torch._C._nn.pad", "torch._C._nn.scaled_dot_product_attention",
    "torch.nn.functional.softmax", "torch.nn.functional.layer_norm", "torch.functional.einsum",
    "torch._C._linalg.linalg_norm", "torch._C._set_grad_enabled", "torch.amp.autocast_mode._enter_autocast",
    "torch.ops.aten.relu.default", "torch.ops.prims.fma.default", "_operator.getitem", "_operator.setitem",
    "operator.add", "math.sqrt", "max", "builtins.max", "torch.sym_float", "torch._foreach_add_", "torch.stack",
])
def test_the_table_admits_what_dynamo_graphs_call(target):
    assert graph_ops.target_refusal(target) is None


def test_methods_that_take_callables_or_share_storage_are_refused():
    for method in ("apply_", "map_", "map2_", "register_hook", "register_post_accumulate_grad_hook", "storage",
                   "untyped_storage", "set_", "share_memory_", "module_load", "__reduce_ex__", "__setstate__",
                   "__class__", "__init__", "_make_subclass", "__deepcopy__"):
        assert graph_ops.method_refusal(method) is not None, method
    for method in ("view", "to", "float", "sum", "add_", "new_zeros", "stride", "size", "__add__", "unbind"):
        assert graph_ops.method_refusal(method) is None, method


# -- names and structure -----------------------------------------------------------------------------


def test_a_code_bearing_placeholder_name_is_renamed_everywhere(tmp_path):
    hostile = HOSTILE_NAME.format(marker=tmp_path / "marker")
    graph = sin_graph(hostile)
    node(graph, "sin")["name"] = "sin\nimport os"  # a name that would break out of a comment
    graph = rename(graph, "sin\nimport os", "sin\nimport os")
    graph["nodes"][2]["args"][0] = {"node": "sin\nimport os"}
    graph["nodes"][2]["inputs"] = ["sin\nimport os"]
    checked = checked_graph(graph)
    names = [n["name"] for n in checked.graph["nodes"]]
    assert names == ["arg0", "node_1", "mul", "add", "output"]
    assert checked.graph["nodes"][0]["target"] == "arg0"
    assert checked.graph["nodes"][1]["args"] == [{"node": "arg0"}] and checked.graph["nodes"][1]["inputs"] == ["arg0"]
    assert checked.graph["nodes"][2]["args"][0] == {"node": "node_1"}
    assert "__import__" not in json.dumps(checked.graph)
    assert "renamed 2 graph value(s)" in checked.note() and "arg0" in checked.note()


@pytest.mark.parametrize("name", ["torch", "self", "print", "__import__", "class", "a-b", "", "é" * 300, "inf"])
def test_names_the_generated_code_uses_are_renamed(name):
    checked = checked_graph(rename(sin_graph(), "l_x_", name))
    assert checked.graph["nodes"][0]["name"] == "arg0"


def test_renaming_never_collides_with_a_recorded_name():
    graph = rename(rename(sin_graph(), "l_x_", "x y"), "mul", "arg0")
    names = [n["name"] for n in checked_graph(graph).graph["nodes"]]
    assert len(set(names)) == len(names) and names[0] == "arg0_" and names[2] == "arg0"


def _broken(change):
    graph = sin_graph()
    change(graph)
    return graph


@pytest.mark.parametrize("graph, words", [
    ({"nodes": "x"}, "not a graph"),
    ({"nodes": []}, "0 nodes"),
    (_broken(lambda g: g["nodes"].insert(1, 7)), "not a named node"),
    (_broken(lambda g: g["nodes"][1].pop("name")), "not a named node"),
    (_broken(lambda g: g["nodes"][2].update(name="sin")), "reuses the name"),
    (_broken(lambda g: g["nodes"][1].update(args=[{"node": "nowhere"}])), "not defined before it"),
    (_broken(lambda g: g["nodes"][1].update(inputs=["add"])), "not defined before it"),
    (_broken(lambda g: g["nodes"][1].update(kwargs={"alpha=__import__('os').system('x'),b": 1})), "keyword"),
    (_broken(lambda g: g["nodes"][1].update(kwargs={"__class__": 1})), "keyword"),
    (_broken(lambda g: g["nodes"][1].update(args=[{"$": "dtype", "name": "os"}])), "dtype constant"),
    (_broken(lambda g: g["nodes"][1].update(args=[{"$": "device", "type": "cpu')\nimport os#", "index": None}])),
     "device constant"),
    (_broken(lambda g: g["nodes"][0]["tensor"].update(dtype="float32; __import__('os').system('x')")), "dtype"),
    (_broken(lambda g: g["nodes"][0]["tensor"].update(device="cpu'); import os; ('")), "device"),
    (_broken(lambda g: g["nodes"][0]["tensor"].update(shape=["1); import os; (1"])), "shape"),
    (_broken(lambda g: g["nodes"][1].update(args=[10 ** 400])), "out of range"),
    (_broken(lambda g: g["nodes"][1].update(args=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]])),
     "nest deeper"),
    (_broken(lambda g: g["nodes"][1].update(op="eval")), "unknown kind"),
    (_broken(lambda g: g["nodes"].pop()), "does not end with its one output"),
    (_broken(lambda g: g["nodes"][1].update(target=["torch", "sin"])), "not a name"),
])
def test_a_graph_that_is_not_what_the_recorder_writes_is_refused(graph, words):
    with pytest.raises(GraphError, match=words):
        checked_graph(graph)


def test_input_specs_are_checked_like_the_graph():
    placeholders = [n for n in sin_graph()["nodes"] if n["op"] == "placeholder"]
    good = {"kind": "tensor", "shape": [4], "stride": [1], "dtype": "float32", "device": "cpu", "requires_grad": False}
    assert checked_inputs([good], placeholders) == [good]
    for bad in ({**good, "dtype": "float32, __import__('os')"}, {**good, "device": "cpu'\n"}, {**good, "shape": [-1]},
                {**good, "requires_grad": "yes"}, {"kind": "int", "value": "__import__('os')"}, "tensor"):
        with pytest.raises(GraphError):
            checked_inputs([bad], placeholders)
    with pytest.raises(GraphError, match="1 inputs but 2"):
        checked_inputs([good, good], placeholders)


# -- settings -----------------------------------------------------------------------------------------


def test_only_lowering_and_numerics_settings_are_applied():
    recorded = {
        "torch._inductor.config": {
            "cpp.inject_relu_bug_TESTING_ONLY": "compile_error", "fallback_random": True, "max_fusion_size": 32,
            "cpp.cxx": [None, "./cc.sh"], "cpp.march": "native -fplugin=./evil.so", "cuda.cutlass_dir": "/tmp/x",
            "trace.enabled": True, "trace.debug_dir": "/tmp/x", "debug": True, "global_cache_dir": "/tmp/x",
            "aot_inductor.output_path": "/tmp/x", "post_grad_custom_post_pass": "os.system",
            "cpp.enable_floating_point_contract_flag": "fast -fplugin=./evil.so", "fallback_by_default": "yes",
            "cpp.threads": 10 ** 30, "cpp.inject_log1p_bug_TESTING_ONLY": "__import__('os')",
        },
        "torch._dynamo.config": {"capture_scalar_outputs": True, "debug_dir_root": "/tmp/x", "cprofile": True},
        "torch.compiler.config": {"cache_key_tag": "x"},
        "os": {"system": "touch x"},
    }
    kept, dropped = replay_settings.split(recorded)
    assert kept == {"torch._inductor.config": {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error",
                                               "fallback_random": True, "max_fusion_size": 32},
                    "torch._dynamo.config": {"capture_scalar_outputs": True}}
    assert "torch._inductor.config.cpp.cxx" in dropped and "os.system" in dropped and len(dropped) == 17
    note = replay_settings.dropped_note(dropped)
    assert note.startswith("recorded settings not applied") and "cpp.cxx" in note and "and 9 more" in note


def test_no_table_setting_can_carry_a_program_path_or_callable():
    """Every value the table admits is a bool, a number or one of a few fixed words: none can
    name a program, a path or a callable, whatever the setting."""
    for module, settings in replay_settings.REPLAYED.items():
        for name, kind in settings.items():
            assert kind in ("bool", "int", "number") or all(isinstance(v, str) and v.isidentifier() for v in kind), name
            for value in ("./cc.sh", "/bin/sh", "os.system", "native -fplugin=./evil.so", ["g++"], {"a": 1}):
                assert not replay_settings.allowed(module, name, value), (name, value)
    for dangerous in ("cpp.cxx", "cpp.march", "cuda.cuda_cxx", "cuda.arch", "cutlass.cutlass_dir", "global_cache_dir",
                      "trace.debug_dir", "trace.enabled", "debug", "aot_inductor.output_path", "post_grad_custom_post_pass",
                      "joint_custom_pre_pass", "pre_grad_custom_pass", "inductor_choices_class", "autoheuristic_log_path",
                      "profile_bandwidth_output", "benchmark_harness", "custom_partitioner_fn", "cpu_backend"):
        assert dangerous not in replay_settings.REPLAYED["torch._inductor.config"], dangerous


def test_backend_options_and_names_from_a_record_are_checked():
    backend, dropped = replay_settings.checked_backend(
        {"name": "inductor", "mode": None, "custom": False, "label": "inductor",
         "options": {"cpp.cxx": [None, "./cc.sh"], "fallback_random": True}})
    assert backend["options"] == {"fallback_random": True} and dropped == ["torch._inductor.config.cpp.cxx"]
    for name, mode in (("inductor'); import os; ('", None), ("inductor", "max-autotune'; import os"), (["x"], None)):
        backend, _ = replay_settings.checked_backend({"name": name, "mode": mode})
        assert backend["name"] is None and backend["custom"] is True


def test_a_failure_record_from_a_tarball_is_checked_like_a_capture(tmp_path):
    """`minify --resume` reads OUT/failure.json: its graph, settings and backend go through the same checks."""
    graph = sin_graph(HOSTILE_NAME.format(marker=tmp_path / "m"))
    placeholders = [n for n in graph["nodes"] if n["op"] == "placeholder"]
    data = {"graph": graph, "inputs": [{"kind": "tensor", "shape": [4], "stride": [1], "dtype": "float32",
                                        "device": "cpu", "requires_grad": False}] * len(placeholders),
            "backend": {"name": "inductor", "options": {"cpp.cxx": "./cc.sh"}, "mode": None, "custom": False},
            "configs": {"torch._inductor.config": {"cpp.cxx": "./cc.sh", "fallback_random": True}},
            "values": "../../../../etc/passwd", "signature": None}
    case = case_from_failure(data, str(tmp_path))
    assert case.fragment.placeholders[0]["name"] == "arg0"
    assert case.configs == {"torch._inductor.config": {"fallback_random": True}}
    assert case.backend["options"] is None and sorted(case.dropped_settings) == [
        "torch._inductor.config.cpp.cxx", "torch._inductor.config.cpp.cxx"]
    assert case.values["path"] == str(tmp_path / "passwd")  # never outside the output directory
    assert any("renamed 1 graph value" in n for n in case.notes) and any("cpp.cxx" in n for n in case.notes)


# -- repro.py -----------------------------------------------------------------------------------------

FORWARD = """def forward(self, arg0, l_w_):
    _set_grad_enabled = torch._C._set_grad_enabled(False)
    sin = torch.sin(arg0)
    mul = sin * 2
    linear = torch._C._nn.linear(mul, l_w_)
    relu = torch.ops.aten.relu.default(linear)
    view = relu.view(-1).to(torch.float16, memory_format = torch.contiguous_format)
    getitem = view[(slice(1, None, None), Ellipsis)]
    getitem += 2
    full = torch.full((2,), inf, device = device(type='cpu'))
    sqrt = math_sqrt(2.0) + max(1, 2)
    return (getitem, full, sqrt)"""


def spec(forward: str = FORWARD, **changes) -> ReproSpec:
    fragment = Fragment(sin_graph("arg0"), [{"kind": "tensor", "shape": [4], "stride": [1], "dtype": "float32",
                                             "device": "cpu", "requires_grad": True}])
    fields = dict(fragment=fragment, forward_source=forward,
                  imports=["import torch", "from math import inf", "from torch import device",
                           "from math import sqrt as math_sqrt"],
                  backend={"name": "inductor", "mode": "max-autotune", "options": {"fallback_random": True}},
                  configs={"torch._inductor.config": {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"}},
                  grad_enabled=True, accuracy={"rtol": 1e-3, "atol": 1e-3}, recorded=["arg0"],
                  title='torch.compile compile error: """ \\ end', details=["Fails with backend='inductor'."])
    fields.update(changes)
    return ReproSpec(**fields)


def test_a_repro_the_generator_writes_passes_the_check():
    text = render(spec())
    assert problem(text, "repro_inputs.pt") is None, problem(text, "repro_inputs.pt")
    assert problem(render(spec(accuracy=None, recorded=[], configs={}, backend={"name": "eager"})),
                   "repro_inputs.pt") is None


@pytest.mark.parametrize("change, words", [
    (lambda t: t.replace("def forward(self, arg0, l_w_):", "def forward(self, arg0=__import__('os').system('x'), l_w_=1):"),
     "defaults"),
    (lambda t: t.replace("import torch\n", "import torch\nimport os\n", 1), "imports"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = torch.os.system('x')"), "torch.os.system"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = torch.builtins.exec('x')"), "torch.builtins.exec"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = __import__('os').system('x')"), "'system'"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = __import__('os')"), "__import__"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = getattr(torch, 'load')('x')"), "getattr"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = arg0.__class__.__init__"), "__init__"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = torch.sin.__globals__"), "__globals__"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = (lambda: 1)()"), "Lambda"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = [x for x in arg0]"), "ListComp"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = torch.load('x')"), "loads something other"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    import os"), "Import"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = torch.sin(*arg0)"), "unpacks"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = torch.sin(**arg0)"), "unpacking"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    torch = 1"), "not plain"),
    (lambda t: t.replace("    sin = torch.sin(arg0)", "    sin = torch.ops.aten.from_file.default('x', True, 8)"),
     "from_file"),
    (lambda t: t.replace("'compile_error'", "'compile_error'\ntorch._inductor.config.cpp.cxx = (None, './cc.sh')"),
     "allowed torch setting"),
    (lambda t: t.replace("'compile_error'", "__import__('os').system('x')"), "allowed torch setting"),
    (lambda t: t.replace("options={'fallback_random': True}", "options={'cpp.cxx': './cc.sh'}"), "options"),
    (lambda t: t.replace("backend='inductor'", "backend=__import__('os').system('x')"), "backend"),
    (lambda t: t.replace("weights_only=True", "weights_only=False"), "loads something other"),
    (lambda t: t.replace("    return []", "    import os\n    return []"), "helper tensors_in"),
    (lambda t: t + "\n__import__('os').system('x')\n", "not a statement"),
    (lambda t: t.replace('"""', '"""x"""\nimport os\n"""', 1), "imports"),
    (lambda t: t.replace("def make_inputs():", "def make_inputs(a=print('x')):"), "defaults"),
    (lambda t: t.replace("class Repro(torch.nn.Module):", "@print\nclass Repro(torch.nn.Module):"), "Repro class"),
    (lambda t: t + "\nif __name__ == '__main__':\n    import os\n", "not a statement"),
    (lambda t: t.replace("def forward(", "def forward(self, arg0):\n        return arg0\n\n    def other("),
     "Repro class"),
    (lambda t: "(", "does not parse"),
])
def test_a_repro_with_anything_else_is_refused(change, words):
    text = render(spec())
    assert problem(text, "repro_inputs.pt") is None
    refused = problem(change(text), "repro_inputs.pt")
    assert refused is not None and words in refused, refused


def test_a_repro_rendered_from_an_unchecked_graph_is_refused(tmp_path):
    """Were a hostile name to get past graph_check, the rendered comment or argument would still be caught."""
    hostile = "x\nimport os\nos.system('touch m')\n#"
    fragment = Fragment(sin_graph(hostile), [{"kind": "tensor", "shape": [4], "stride": [1], "dtype": "float32",
                                              "device": "cpu", "requires_grad": False}])
    text = render(spec(fragment=fragment, recorded=[]))
    assert problem(text, "repro_inputs.pt") is not None


# -- the CLI: refused in the parent, before any worker or torch ---------------------------------------


def forged(tmp_path: Path, change) -> Path:
    graph = sin_graph()
    change(graph, tmp_path / "marker")
    return graph_capture(tmp_path / "bug.dynscope", graph)


ATTACKS = {
    "torch.os.system": lambda g, m: node(g, "sin").update(target="torch.os.system", args=[f"touch {m}"]),
    "torch.builtins.exec": lambda g, m: node(g, "sin").update(target="torch.builtins.exec",
                                                             args=[f"open({str(m)!r}, 'w')"]),
    "getattr chain": lambda g, m: node(g, "sin").update(target="torch.nn.modules.module.torch.os.system",
                                                        args=[f"touch {m}"]),
    "__import__": lambda g, m: node(g, "sin").update(target="builtins.__import__", args=["os"]),
    "builtins.getattr": lambda g, m: node(g, "sin").update(target="getattr", args=[{"node": "l_x_"}, "__class__"]),
    "aten.from_file": lambda g, m: node(g, "sin").update(target="torch.ops.aten.from_file.default",
                                                         args=[str(m), True, 16]),
    "hook method": lambda g, m: node(g, "sin").update(op="call_method", target="register_hook",
                                                      args=[{"node": "l_x_"}, "os.system"]),
    "dunder method": lambda g, m: node(g, "sin").update(op="call_method", target="__reduce_ex__",
                                                        args=[{"node": "l_x_"}, 2]),
    "kwargs name": lambda g, m: node(g, "sin").update(kwargs={f"out=__import__('os').system('touch {m}'),x": 1}),
    "dtype as code": lambda g, m: g["nodes"][0]["tensor"].update(dtype=f"float32; __import__('os').system('touch {m}')"),
    "device as code": lambda g, m: g["nodes"][0]["tensor"].update(device=f"cpu'); __import__('os').system('touch {m}"),
    "deep nesting": lambda g, m: node(g, "sin").update(args=[json.loads("[" * 900 + "]" * 900)]),
    "huge integer": lambda g, m: node(g, "mul").update(args=[{"node": "sin"}, 10 ** 4000]),
    "module call": lambda g, m: node(g, "sin").update(op="call_module", target="os"),
}


# The store's own JSON depth bound (64 levels) reads a nested payload before minify does.
_REFUSED_BY = {"deep nesting": "nests deeper than 64 levels"}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_minify_from_a_hostile_graph_is_one_line_and_runs_nothing(tmp_path, attack):
    capture = forged(tmp_path, ATTACKS[attack])
    before = sorted(p.name for p in tmp_path.iterdir())
    started = time.monotonic()
    proc = run_minify("--from", str(capture), "--compile", "0/0", cwd=tmp_path)
    assert time.monotonic() - started < 60  # refused while reading: no worker, no torch
    assert_refused(proc, _REFUSED_BY.get(attack, "compile 0/0"))
    assert not (tmp_path / "marker").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no output directory for a refused capture


def test_a_recorded_settings_dump_nested_too_deeply_is_not_an_internal_error(tmp_path):
    capture = graph_capture(tmp_path / "bug.dynscope", sin_graph())
    import sqlite3

    with sqlite3.connect(capture) as db:
        meta = json.loads(db.execute("SELECT metadata FROM events WHERE name='compilation_metrics'").fetchone()[0])
        meta["compilation_metrics"]["inductor_config"] = "[" * 100_000 + "]" * 100_000
        meta["compilation_metrics"]["dynamo_config"] = "not json"
        db.execute("UPDATE events SET metadata = ? WHERE name='compilation_metrics'", (json.dumps(meta),))
    from dynscope.minifier.case import case_from_capture

    case, dumps = case_from_capture(str(capture), "0/0", "eager")
    assert dumps == {} and case.fragment.placeholders[0]["name"] == "l_x_"
    assert os.path.exists(capture)


# -- time and memory: minify reads only the graph it minifies (items 13 and 14) ----------------------

ONE_GIB = 1 << 30


def honest_gib(path: Path) -> str:
    """A 1 GiB payload (1 MiB stored) with its true size and hash, added to the capture."""
    import hashlib
    import sqlite3

    from hostile import zlib_bomb

    digest = hashlib.blake2b(digest_size=16)
    chunk = b"A" * (1 << 20)
    for _ in range(ONE_GIB >> 20):
        digest.update(chunk)
    with sqlite3.connect(path) as db:
        db.execute("INSERT OR REPLACE INTO blobs(hash, codec, size, data) VALUES (?, 'zlib', ?, ?)",
                   (digest.hexdigest(), ONE_GIB, zlib_bomb(ONE_GIB)))
    return digest.hexdigest()


def measured(code: str, cwd: Path) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run ``code`` in a fresh interpreter: (result, seconds, its peak RSS in KiB)."""
    wrapper = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", wrapper, sys.executable, *code], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    *lines, peak = proc.stderr.strip().splitlines()
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, "\n".join(lines)), \
        time.monotonic() - started, int(peak)


def test_reading_a_compile_does_not_pay_for_payloads_it_does_not_use(tmp_path):
    """Five events of the compile carry honest 1 GiB payloads: minify reads the graph only."""
    import sqlite3

    capture = graph_capture(tmp_path / "bug.dynscope", sin_graph())
    digest = honest_gib(capture)
    with sqlite3.connect(capture) as db:
        for i in range(5):
            db.execute("INSERT INTO events(ts, name, compile_id, attempt, metadata, payload) VALUES (?, ?, '0/0', 0, '{}', ?)",
                       (3.0 + i, f"artifact:big{i}", digest))
    code = ["-c", "from dynscope.minifier.case import case_from_capture as c; "
                  "print(len(c('bug.dynscope', '0/0', 'eager')[0].fragment.nodes))"]
    proc, seconds, peak_kib = measured(code, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "5", proc.stderr
    assert seconds < 20 and peak_kib < 200 * 1024  # measured: 0.4 s, 26 MiB


def test_a_graph_payload_over_the_limit_is_one_line(tmp_path):
    import sqlite3

    capture = graph_capture(tmp_path / "bug.dynscope", sin_graph())
    digest = honest_gib(capture)
    with sqlite3.connect(capture) as db:
        db.execute("UPDATE events SET payload = ? WHERE name = 'dynscope:fx_graph'", (digest,))
    proc, seconds, peak_kib = measured(["-m", "dynscope", "minify", "--from", "bug.dynscope", "--compile", "0/0"],
                                       tmp_path)
    assert_refused(proc, "over the", "limit")
    assert seconds < 30 and peak_kib < 300 * 1024  # measured: 4 s, 94 MiB
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bug.dynscope"]


@pytest.mark.parametrize("field, value", [
    ("signature", ["x"]), ("attribution", "x"), ("exception", [1]), ("notes", "abc"), ("accuracy", {"rtol": "x'"}),
    ("backend", 7), ("configs", ["cpp.cxx"]), ("values", {"a": 1}), ("grad_enabled", "no"), ("compile_id", {"x": 1}),
])
def test_a_failure_record_with_odd_fields_is_read_or_refused_in_one_line(tmp_path, field, value):
    graph = sin_graph()
    data = {"graph": graph, "inputs": [{"kind": "tensor", "shape": [4], "stride": [1], "dtype": "float32",
                                        "device": "cpu", "requires_grad": False}],
            "backend": {"name": "eager"}, "configs": {}, "signature": None, field: value}
    case = case_from_failure(data, str(tmp_path))
    assert case.accuracy is None or all(isinstance(v, float) for v in case.accuracy.values())
    assert case.configs == {} and case.backend.get("options") is None
