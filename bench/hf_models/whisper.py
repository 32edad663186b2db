"""Whisper (speech encoder-decoder) from a tiny config, eval mode, a few compiled forwards (the decoder builds its cache).

    python bench/hf_models/whisper.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import WhisperConfig, WhisperModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=32, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, num_mel_bins=8, max_source_positions=16,
        max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
        dropout=0.0, attention_dropout=0.0,
    )
    model = WhisperModel(config).eval()
    compiled = torch.compile(model, backend=args.backend)
    input_features = torch.randn(2, 8, 32)
    decoder_input_ids = torch.randint(3, 32, (2, 4))
    with torch.no_grad():
        for _ in range(args.calls):
            out = compiled(input_features=input_features, decoder_input_ids=decoder_input_ids).last_hidden_state
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
