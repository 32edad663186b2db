"""The generated bench's pure parts: a tiny config derived from a config's own defaults, and the fixed split.

No torch or transformers import here: the rules are data over a config's dict (`config.to_dict()`, or a diffusers
model's `__init__` defaults), so they are unit-tested without building a model (tests/unit/test_generated_bench.py).

Scaling only ever lowers a value (a default already tiny stays), so a config keeps its own shape: a model whose
defaults have 6 layers gets 2, one with 1 keeps 1. Per-layer lists (`layer_types`, ...) are cut to the new depth.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

LAYERS = 2
WIDTH = 32
HEADS = 2
FFN = 64
VOCAB = 128
IMAGE = 32
PATCH = 8
EXPERTS = 4
TOP_K = 2

# name -> the most it may be; matched on the exact key, in the config and in each of its sub-configs
CEILINGS: dict[str, int] = {
    **dict.fromkeys(("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
                     "num_encoder_layers", "num_decoder_layers", "depth", "num_blocks", "num_single_layers",
                     "text_num_hidden_layers", "vision_num_hidden_layers", "num_text_layers", "num_vision_layers"),
                    LAYERS),
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "embed_dim", "dim", "hidden_dim", "embedding_size",
                     "projection_dim", "word_embed_proj_dim", "model_dim", "d_embed", "emb_dim", "n_embed",
                     "embedding_dim", "encoder_hidden_size", "decoder_hidden_size", "cross_attention_dim",
                     "joint_attention_dim", "caption_channels", "pooled_projection_dim", "text_embed_dim"), WIDTH),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
                     "decoder_attention_heads", "num_key_value_heads", "n_kv_heads", "num_kv_heads",
                     "encoder_num_attention_heads", "decoder_num_attention_heads"), HEADS),
    **dict.fromkeys(("head_dim", "attention_head_dim", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
                     "kv_channels", "rotary_dim", "rotary_emb_dim"), WIDTH // HEADS),
    **dict.fromkeys(("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner",
                     "moe_intermediate_size", "shared_expert_intermediate_size", "decoder_intermediate_size",
                     "mlp_dim", "ff_inner_dim"), FFN),
    **dict.fromkeys(("vocab_size", "n_vocab", "num_embeddings", "codebook_size"), VOCAB),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "num_experts_total"),
                    EXPERTS),
    **dict.fromkeys(("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k", "moe_k"), TOP_K),
    **dict.fromkeys(("image_size", "img_size", "sample_size", "input_size"), IMAGE),
    "patch_size": PATCH,
    "layers_per_block": 1,
    **dict.fromkeys(("q_lora_rank", "kv_lora_rank"), WIDTH // 2),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "max_seq_len", "max_sequence_length"), 512),
}
STAGE_WIDTHS = ("hidden_sizes", "block_out_channels", "channels", "dims", "embed_dims", "conv_dim", "widths",
                "out_channels_list", "encoder_hidden_sizes", "decoder_hidden_sizes")
STAGE_DEPTHS = ("depths", "num_res_blocks", "blocks_per_stage", "stage_depths")
STAGE_HEADS = ("num_heads", "num_attention_heads", "attention_heads", "num_heads_per_stage")
DEPTH_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers")
# a float named so is a probability of dropping something: zero keeps the training step deterministic
DROP_MARKERS = ("dropout", "drop_rate", "drop_prob", "layerdrop", "drop_path")
TOKEN_ID_SUFFIXES = ("_token_id", "_token_index", "_token_ids")


def scale_value(key: str, value: object) -> object | None:
    """The tiny value for one config entry, or None to keep the default."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and key in CEILINGS and value > CEILINGS[key]:
        return CEILINGS[key]
    if isinstance(value, float) and any(marker in key for marker in DROP_MARKERS) and value > 0:
        return 0.0
    if key.endswith(TOKEN_ID_SUFFIXES):
        return _token_id(value)
    return None


def scale_list(key: str, value: list[object]) -> list[object] | None:
    """Per-stage lists of convolutional and diffusion models: widths grow by WIDTH a stage, depths become 1."""
    if key.endswith(TOKEN_ID_SUFFIXES):
        return _token_id(value)  # type: ignore[return-value]
    if not value or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    ints = [int(v) for v in value]  # type: ignore[call-overload]
    if key in STAGE_WIDTHS:
        scaled = [min(v, WIDTH * (i + 1)) for i, v in enumerate(ints)]
    elif key in STAGE_DEPTHS:
        scaled = [min(v, 1) for v in ints]
    elif key in STAGE_HEADS:
        scaled = [min(v, HEADS) for v in ints]
    else:
        return None
    return list(scaled) if scaled != ints else None


def _token_id(value: object) -> object | None:
    """Special token ids past the tiny vocabulary move to its top (distinct ids stay distinct, mostly)."""
    if isinstance(value, int) and value >= VOCAB:
        return VOCAB - 1 - value % 8
    if isinstance(value, list) and any(isinstance(v, int) and v >= VOCAB for v in value):
        return [VOCAB - 1 - v % 8 if isinstance(v, int) and v >= VOCAB else v for v in value]
    return None


def tiny_overrides(defaults: Mapping[str, object]) -> dict[str, object]:
    """The keyword arguments that make a config tiny: the scaled entries, per-layer lists cut to the new depth, and
    each sub-config's own overrides (as a partial dict, which composite configs accept)."""
    overrides: dict[str, object] = {}
    for key, value in defaults.items():
        if not isinstance(key, str) or key in ("id2label", "label2id"):
            continue
        if isinstance(value, Mapping):
            nested = per_layer(value) if _keyed_by_layer(value) else tiny_overrides(value)
            if nested:
                overrides[key] = {**value, **nested} if not _keyed_by_layer(value) else nested
            continue
        scaled = scale_list(key, value) if isinstance(value, list) else scale_value(key, value)
        if scaled is not None:
            overrides[key] = scaled
    depth = next((defaults[k] for k in DEPTH_KEYS if isinstance(defaults.get(k), int)), None)
    if isinstance(depth, int) and depth > LAYERS:
        for key, value in defaults.items():
            if isinstance(value, list) and len(value) == depth and key not in STAGE_WIDTHS + STAGE_DEPTHS + STAGE_HEADS:
                overrides[key] = value[:LAYERS]
    return overrides


def _keyed_by_layer(value: Mapping[object, object]) -> bool:
    return bool(value) and all(isinstance(k, int) or (isinstance(k, str) and k.isdigit()) for k in value)


def per_layer(value: Mapping[object, object]) -> dict[object, object]:
    """A per-layer table (keys are layer indices): the entries of the layers kept, or nothing when none goes."""
    kept = {k: v for k, v in value.items() if int(k) < LAYERS}  # type: ignore[call-overload]
    return kept if len(kept) < len(value) else {}


def half_of(name: str) -> str:
    """The fixed split: "tuned" (rules may be written looking at it) or "untuned" (reported, never tuned on), by
    the first byte of the class name's SHA-256 — stable across machines, runs and library versions."""
    return "tuned" if hashlib.sha256(name.encode()).digest()[0] % 2 == 0 else "untuned"
