"""ViLT (vision-and-language transformer: text tokens and image patches) from a tiny config, eval mode, a few compiled forwards.

    python bench/hf_models/vilt.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import ViltConfig, ViltModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = ViltConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        image_size=32, patch_size=8, num_channels=3, max_position_embeddings=16, modality_type_vocab_size=2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    model = ViltModel(config).eval()
    compiled = torch.compile(model, backend=args.backend)
    input_ids = torch.randint(0, 32, (2, 8))
    pixel_values = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        for _ in range(args.calls):
            out = compiled(input_ids=input_ids, pixel_values=pixel_values).last_hidden_state
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
