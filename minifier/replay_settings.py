"""Which recorded torch settings minify applies again, in its checks and in repro.py (no torch here).

A capture (or failure.json) records the program's non-default torch.compile settings, and a
failure often needs them (torch's own fault injection is a setting). But a setting can name a
program (``cpp.cxx``: the C++ compiler Inductor runs), a path, a directory, a callable, a hook,
a cache, or where debug output goes; applying it from a stranger's file would run or write
what the file says. So a setting is applied only when this table lists it: settings that
change how a graph is lowered or what it computes, each with the values it may take. Every
other recorded setting is dropped, and the report names the dropped ones in one line.
"""

from __future__ import annotations

import re
from typing import Any

_BOOL, _INT, _NUMBER = "bool", "int", "number"
_INJECTED_BUGS = ("compile_error", "runtime_error", "accuracy")

# module -> setting -> kind of value ("bool", "int" or None, "number" or None, or the strings
# it may be). Lowering and numerics only: nothing here names a program, path, directory,
# callable, hook, cache, environment or debug output, and no value is a free-form string (a
# string setting such as cpp.march becomes a compiler flag).
REPLAYED: dict[str, dict[str, Any]] = {
    "torch._inductor.config": {
        # torch's own fault injection (what `dynscope minify`'s tests and torch's minifier use)
        "cpp.inject_relu_bug_TESTING_ONLY": _INJECTED_BUGS,
        "cpp.inject_log1p_bug_TESTING_ONLY": _INJECTED_BUGS,
        "triton.inject_relu_bug_TESTING_ONLY": _INJECTED_BUGS,
        # numerics
        "fallback_random": _BOOL, "emulate_precision_casts": _BOOL, "deterministic": _BOOL,
        "eager_numerics.division_rounding": _BOOL, "eager_numerics.disable_ftz": _BOOL,
        "eager_numerics.use_pytorch_libdevice": _BOOL, "online_softmax": _BOOL,
        "cpp.enable_unsafe_math_opt_flag": _BOOL, "cpp.enable_floating_point_contract_flag": ("off", "on", "fast"),
        "cpp.use_decompose_tanh": _BOOL, "cpp.fallback_scatter_reduce_sum": _BOOL,
        "triton.codegen_upcast_to_fp32": _BOOL,
        # lowering, fusion and layout
        "layout_optimization": _BOOL, "force_layout_optimization": _BOOL, "comprehensive_padding": _BOOL,
        "pad_outputs": _BOOL, "shape_padding": _BOOL, "keep_output_stride": _BOOL, "implicit_fallbacks": _BOOL,
        "fallback_by_default": _BOOL, "split_reductions": _BOOL, "max_autotune": _BOOL, "max_autotune_gemm": _BOOL,
        "max_autotune_pointwise": _BOOL, "coordinate_descent_tuning": _BOOL, "epilogue_fusion": _BOOL,
        "epilogue_fusion_first": _BOOL, "pattern_matcher": _BOOL, "freezing": _BOOL, "aggressive_fusion": _BOOL,
        "permute_fusion": _BOOL, "dce": _BOOL, "cpp_wrapper": _BOOL, "size_asserts": _BOOL, "nan_asserts": _BOOL,
        "alignment_asserts": _BOOL, "scalar_asserts": _BOOL, "loop_ordering_after_fusion": _BOOL,
        "reorder_for_locality": _BOOL, "graph_partition": _BOOL, "memory_planning": _BOOL,
        "allow_buffer_reuse": _BOOL, "inplace_buffers": _BOOL, "joint_graph_constant_folding": _BOOL,
        "conv_1x1_as_mm": _BOOL, "combo_kernels": _BOOL, "disable_cpp_codegen": _BOOL, "force_pointwise_cat": _BOOL,
        "assume_aligned_inputs": _BOOL, "use_mixed_mm": _BOOL,
        "realize_reads_threshold": _INT, "realize_opcount_threshold": _INT, "realize_acc_reads_threshold": _INT,
        "unroll_reductions_threshold": _INT, "max_fusion_size": _INT, "max_pointwise_cat_inputs": _INT,
        "min_num_split": _INT, "padding_alignment_bytes": _INT, "padding_stride_threshold": _INT,
        "triton.cudagraphs": _BOOL, "triton.cudagraph_trees": _BOOL, "triton.persistent_reductions": _BOOL,
        "triton.multi_kernel": _INT, "triton.prefer_nd_tiling": _BOOL, "triton.tiling_prevents_pointwise_fusion": _BOOL,
        "triton.tiling_prevents_reduction_fusion": _BOOL, "triton.use_block_ptr": _BOOL,
        "triton.divisible_by_16": _BOOL, "triton.max_tiles": _INT, "triton.autotune_pointwise": _BOOL,
        "triton.cooperative_reductions": _BOOL, "triton.enable_persistent_tma_matmul": _BOOL,
        "cpp.simdlen": _INT, "cpp.threads": _INT, "cpp.dynamic_threads": _BOOL, "cpp.enable_tiling_heuristics": _BOOL,
        "cpp.enable_loop_tail_vec": _BOOL, "cpp.vec_isa_ok": _BOOL, "cpp.weight_prepack": _BOOL,
        "cpp.min_chunk_size": _INT, "cpp.max_horizontal_fusion_size": _INT, "cpp.enable_concat_linear": _BOOL,
        "cpp.gemm_max_k_slices": _INT, "cpp.no_redundant_loops": _BOOL, "cpp.use_small_dequant_buffer": _BOOL,
    },
    "torch._functorch.config": {
        "cse": _BOOL, "activation_memory_budget": _NUMBER, "functionalize_rng_ops": _BOOL,
        "view_replay_for_aliased_outputs": _BOOL, "treat_parameters_as_free_to_save": _BOOL,
    },
    "torch._dynamo.config": {
        "capture_scalar_outputs": _BOOL, "capture_dynamic_output_shape_ops": _BOOL, "specialize_int": _BOOL,
        "specialize_float": _BOOL, "assume_static_by_default": _BOOL, "automatic_dynamic_shapes": _BOOL,
    },
}


def split(configs: Any) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(the settings this table allows, "module.setting" of every other one)."""
    kept: dict[str, dict[str, Any]] = {}
    dropped: list[str] = []
    if not isinstance(configs, dict):
        return kept, dropped
    for module, values in configs.items():
        if not isinstance(values, dict):
            dropped.append(str(module))
            continue
        for key, value in values.items():
            if allowed(module, key, value):
                kept.setdefault(module, {})[key] = value
            else:
                dropped.append(f"{module}.{key}")
    return kept, dropped


def allowed(module: Any, key: Any, value: Any) -> bool:
    kind = REPLAYED.get(module, {}).get(key) if isinstance(module, str) and isinstance(key, str) else None
    if kind is None:
        return False
    if kind == _BOOL:
        return isinstance(value, bool) or (value is None and key == "cpp.vec_isa_ok")
    if kind == _INT:
        return value is None or (isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 31)
    if kind == _NUMBER:
        return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e9)
    return value in kind  # one of the listed strings


def backend_options(options: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """torch.compile(options=...) names Inductor settings: the same table decides."""
    if not options:
        return None, []
    if not isinstance(options, dict):
        return None, ["torch.compile options"]
    kept, dropped = split({"torch._inductor.config": options})
    return kept.get("torch._inductor.config") or None, dropped


def dropped_note(dropped: list[str]) -> str | None:
    """One line naming the settings not applied (None when there are none)."""
    if not dropped:
        return None
    shown = ", ".join(name[:80] for name in dropped[:8]) + (f" and {len(dropped) - 8} more" if len(dropped) > 8 else "")
    return (f"recorded settings not applied (minify applies only settings that change lowering or numerics, "
            f"never one that names a program, path or callable): {shown}")


_BACKEND_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,59}")
_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def checked_backend(backend: Any) -> tuple[dict[str, Any], list[str]]:
    """A recorded backend ({"name", "options", "mode", "custom", "label"}) with its options
    reduced to the table's settings; a name that is not a plain registered-backend name, or
    a mode torch does not have, makes it a custom backend (minify then tries torch's own)."""
    if not isinstance(backend, dict):
        backend = {}
    name, mode = backend.get("name"), backend.get("mode")
    options, dropped = backend_options(backend.get("options"))
    plain = isinstance(name, str) and _BACKEND_NAME.fullmatch(name) is not None and mode in _MODES
    label = str(backend.get("label") or name or "a backend")[:200]
    if not plain:
        return {"name": None, "options": None, "mode": None, "custom": True, "label": label}, dropped
    return {"name": name, "options": options, "mode": mode, "custom": bool(backend.get("custom")), "label": label}, dropped
