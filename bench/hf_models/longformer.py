"""Longformer (sliding-window attention) from a tiny config, eval mode, a few compiled forwards.

    python bench/hf_models/longformer.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import LongformerConfig, LongformerModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = LongformerConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        attention_window=4, max_position_embeddings=64, pad_token_id=1, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = LongformerModel(config).eval()
    compiled = torch.compile(model, backend=args.backend)
    input_ids = torch.randint(2, 32, (2, 16))
    with torch.no_grad():
        for _ in range(args.calls):
            out = compiled(input_ids=input_ids).last_hidden_state
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
