"""Wav2Vec2 with a CTC head from a tiny config, training-mode forwards (SpecAugment time masking: NumPy random spans).

    python bench/hf_models/wav2vec2.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import numpy as np
import torch
from transformers import Wav2Vec2Config, Wav2Vec2ForCTC


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    np.random.seed(0)  # SpecAugment draws its spans with NumPy
    config = Wav2Vec2Config(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=12,
        conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        feat_proj_dropout=0.0, layerdrop=0.0,
        mask_time_prob=0.5, mask_time_length=2,
    )
    model = Wav2Vec2ForCTC(config).train()
    compiled = torch.compile(model, backend=args.backend)
    input_values = torch.randn(2, 800)
    with torch.enable_grad():
        for _ in range(args.calls):
            out = compiled(input_values).logits
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
