"""MRA (multi-resolution approximate attention) from a tiny config, eval mode with gradients on (no torch.no_grad()), a few forwards.

    python bench/hf_models/mra.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import MraConfig, MraModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = MraConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=160, block_per_row=2, approx_mode="full", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = MraModel(config).eval()
    compiled = torch.compile(model, backend=args.backend)
    input_ids = torch.randint(0, 32, (2, 64))
    with torch.enable_grad():
        for _ in range(args.calls):
            out = compiled(input_ids=input_ids).last_hidden_state
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
