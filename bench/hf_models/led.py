"""LED (Longformer encoder-decoder) from a tiny config, eval mode, a few compiled forwards.

    python bench/hf_models/led.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import LEDConfig, LEDModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = LEDConfig(
        vocab_size=32, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, attention_window=4,
        max_encoder_position_embeddings=64, max_decoder_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
    )
    model = LEDModel(config).eval()
    compiled = torch.compile(model, backend=args.backend)
    input_ids = torch.randint(2, 32, (2, 16))
    decoder_input_ids = torch.randint(2, 32, (2, 8))
    with torch.no_grad():
        for _ in range(args.calls):
            out = compiled(input_ids=input_ids, decoder_input_ids=decoder_input_ids).last_hidden_state
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
