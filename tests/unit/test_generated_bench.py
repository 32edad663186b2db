"""The generated bench's pure parts (bench/generated/derive.py): tiny configs derived from defaults, and the fixed
split into a tuned and an untuned half."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "generated"))

from derive import LAYERS, VOCAB, WIDTH, half_of, tiny_overrides  # noqa: E402

LLAMA_DEFAULTS = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "max_position_embeddings": 2048,
    "attention_dropout": 0.1, "bos_token_id": 1, "eos_token_id": 32001, "use_cache": True, "rms_norm_eps": 1e-6,
    "layer_types": ["full_attention"] * 32, "id2label": {0: "LABEL_0"},
}


def test_a_large_config_is_scaled_to_the_tiny_sizes_and_keeps_what_is_not_a_size():
    got = tiny_overrides(LLAMA_DEFAULTS)
    assert got == {
        "vocab_size": VOCAB, "hidden_size": WIDTH, "intermediate_size": 64, "num_hidden_layers": LAYERS,
        "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 512,
        "attention_dropout": 0.0, "eos_token_id": VOCAB - 1 - 32001 % 8,
        "layer_types": ["full_attention"] * LAYERS,
    }


def test_scaling_only_lowers_a_value_and_never_touches_booleans():
    got = tiny_overrides({"num_hidden_layers": 1, "hidden_size": 16, "use_cache": True, "vocab_size": 50})
    assert got == {}


def test_sub_configs_get_their_own_overrides_as_a_whole_dict():
    defaults = {"projection_dim": 512, "text_config": {"hidden_size": 512, "num_hidden_layers": 12, "act": "gelu"},
                "vision_config": {"image_size": 224, "patch_size": 32, "num_channels": 3}}
    got = tiny_overrides(defaults)
    assert got == {"projection_dim": WIDTH,
                   "text_config": {"hidden_size": WIDTH, "num_hidden_layers": LAYERS, "act": "gelu"},
                   "vision_config": {"image_size": 32, "patch_size": 8, "num_channels": 3}}


def test_stage_lists_of_convolutional_models_shrink_per_stage():
    got = tiny_overrides({"hidden_sizes": [256, 512, 1024, 2048], "depths": [3, 4, 6, 3],
                          "block_out_channels": [320, 640, 1280, 1280], "layers_per_block": 2})
    assert got == {"hidden_sizes": [32, 64, 96, 128], "depths": [1, 1, 1, 1],
                   "block_out_channels": [32, 64, 96, 128], "layers_per_block": 1}


def test_token_id_lists_past_the_vocabulary_move_inside_it():
    assert tiny_overrides({"eos_token_id": [1, 50256]}) == {"eos_token_id": [1, VOCAB - 1 - 50256 % 8]}


def test_the_split_is_fixed_by_the_class_name_and_near_half():
    # recorded once: a change to the hash would move models between halves (a model tuned on could be reported)
    assert [half_of(n) for n in ("BertModel", "LongformerModel", "HubertModel", "UNet2DModel")] == \
        ["tuned", "untuned", "untuned", "untuned"]
    names = [f"Model{i}" for i in range(2000)]
    tuned = sum(half_of(n) == "tuned" for n in names)
    assert 900 < tuned < 1100
    assert {half_of(n) for n in names} == {"tuned", "untuned"}


def test_per_layer_tables_and_per_stage_heads_follow_the_new_depth():
    got = tiny_overrides({"num_hidden_layers": 4, "per_layer_config": {str(i): {"window": 8} for i in range(4)},
                          "num_heads": [3, 6, 12, 24], "rotary_dim": 64})
    assert got == {"num_hidden_layers": LAYERS, "per_layer_config": {"0": {"window": 8}, "1": {"window": 8}},
                   "num_heads": [2, 2, 2, 2], "rotary_dim": 16}
