"""Build one model of the generated bench from its name alone: the config derived tiny (derive.py), random weights
(seed 0, no download), and inputs derived from the model's forward signature at a given size.

A spec names the library and the class: ``transformers:BertModel``, ``diffusers:UNet2DModel``. What cannot be
built or fed raises `Unbuildable` with the reason the survey records.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
from derive import VOCAB, tiny_overrides

MAX_PARAMS = 30_000_000  # after scaling: bigger means the derivation missed a size (a fixed 4096, say)
SEQ = (8, 16)  # tokens per size; the batch is the size's index + 1
AUDIO = (8000, 16000)  # samples per size (wav2vec2's conv stack divides by 320; SpecAugment spans 10 frames)


class Unbuildable(Exception):
    """The model cannot be built from a derived config or fed derived inputs; the message is the reason."""


@dataclass
class Built:
    model: torch.nn.Module
    inputs: Callable[[int], dict[str, object]]  # size index (0 or 1) -> the forward's keyword arguments


def build(spec: str) -> Built:
    library, _, name = spec.partition(":")
    builders = {"transformers": _transformers, "diffusers": _diffusers}
    if library not in builders:
        raise Unbuildable(f"unknown library {library!r} (known: {', '.join(builders)})")
    torch.manual_seed(0)
    return builders[library](name)


def _constructed(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    """The model, sized first on the meta device (no memory, no init time: a missed size can mean billions)."""
    try:
        with torch.device("meta"):
            params = sum(p.numel() for p in make().parameters())
        if params > MAX_PARAMS:
            raise Unbuildable(f"{params / 1e6:.0f}M parameters after scaling (the derivation missed a size)")
        torch.manual_seed(0)
        return make()
    except Unbuildable:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure is the model's reason to be left out
        raise Unbuildable(f"build: {type(exc).__name__}: {_first_line(exc)}") from exc


def _transformers(name: str) -> Built:
    import transformers
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    model_type = next((t for t, n in MODEL_MAPPING_NAMES.items() if name in ((n,) if isinstance(n, str) else n)), None)
    if model_type is None or model_type not in CONFIG_MAPPING:
        raise Unbuildable("no config class for it in the auto mappings")
    model_cls = getattr(transformers, name, None)
    if model_cls is None:
        raise Unbuildable("not importable from transformers (a backend it needs is missing)")
    config_cls = CONFIG_MAPPING[model_type]
    try:
        config = config_cls(**tiny_overrides(config_cls().to_dict()))
    except Exception as exc:  # noqa: BLE001 - any failure is the model's reason to be left out
        raise Unbuildable(f"config: {type(exc).__name__}: {_first_line(exc)}") from exc
    model = _constructed(lambda: model_cls(config))
    return Built(model, lambda size: _transformers_inputs(model, config, size))


def _transformers_inputs(model: torch.nn.Module, config: object, size: int) -> dict[str, object]:
    inputs = _transformers_main_inputs(model, config, size)
    if "use_cache" in inspect.signature(model.forward).parameters:
        inputs["use_cache"] = False  # no generation here; a cache of linear-attention layers alone cannot be sized
    return inputs


def _transformers_main_inputs(model: torch.nn.Module, config: object, size: int) -> dict[str, object]:
    params = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    batch = size + 1
    sub = getattr(config, "vision_config", None) or getattr(config, "audio_config", None) or config
    if main == "input_ids":
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        vocab = min(getattr(text, "vocab_size", VOCAB) or VOCAB, VOCAB)
        inputs: dict[str, object] = {"input_ids": torch.randint(3, vocab - 9, (batch, SEQ[size]))}
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
            inputs["decoder_input_ids"] = torch.randint(3, vocab - 9, (batch, SEQ[size] // 2))
        if "pixel_values" in params and _pairs_text_with_images(config):
            inputs.update(_transformers_inputs_for_pixels(sub, batch))
        return inputs
    if main == "pixel_values":
        return _transformers_inputs_for_pixels(sub, batch)
    if main == "input_values":
        return {"input_values": torch.randn(batch, AUDIO[size])}
    if main == "input_features":
        bins = getattr(sub, "num_mel_bins", None) or getattr(sub, "feature_size", 80)
        frames = 2 * getattr(sub, "max_source_positions", 32)
        return {"input_features": torch.randn(batch, bins, frames)}
    raise Unbuildable(f"no inputs derived for its main input {main!r}")


def _pairs_text_with_images(config: object) -> bool:
    """A dual encoder (CLIP, SigLIP, ALIGN...): a vision tower beside the text one, no image tokens in the text."""
    tokens = [k for k in vars(config) if "image_token" in k]
    return getattr(config, "vision_config", None) is not None and not tokens


def _transformers_inputs_for_pixels(vision: object, batch: int) -> dict[str, object]:
    side = getattr(vision, "image_size", 32)
    side = side[0] if isinstance(side, (list, tuple)) else side
    return {"pixel_values": torch.randn(batch, getattr(vision, "num_channels", 3), side, side)}


def _diffusers(name: str) -> Built:
    import diffusers

    model_cls = getattr(diffusers, name, None)
    if model_cls is None:
        raise Unbuildable("not importable from diffusers")
    defaults = {k: p.default for k, p in inspect.signature(model_cls.__init__).parameters.items()
                if p.default is not inspect.Parameter.empty and k != "self"}
    overrides = tiny_overrides({k: list(v) if isinstance(v, tuple) else v for k, v in defaults.items()})
    model = _constructed(lambda: model_cls(**overrides))
    return Built(model, lambda size: _diffusers_inputs(model, size))


def _diffusers_inputs(model: torch.nn.Module, size: int) -> dict[str, object]:
    config = model.config
    params = inspect.signature(model.forward).parameters
    batch = size + 1
    side = 16 * (size + 1)
    channels = config.get("in_channels", 4)
    main = next(iter(params), None)
    if main not in ("sample", "hidden_states"):
        raise Unbuildable(f"no inputs derived for its first argument {main!r}")
    inputs: dict[str, object] = {main: torch.randn(batch, channels, side, side)}
    if "timestep" in params:
        inputs["timestep"] = torch.tensor([10] * batch)
    if "encoder_hidden_states" in params:
        width = config.get("cross_attention_dim") or config.get("joint_attention_dim") or config.get("caption_channels")
        if not isinstance(width, int):
            raise Unbuildable("no width derived for encoder_hidden_states")
        inputs["encoder_hidden_states"] = torch.randn(batch, 4, width)
    return inputs


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""
