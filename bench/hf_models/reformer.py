"""Reformer (local + LSH attention) from a tiny config, eval mode, a few compiled forwards.

    python bench/hf_models/reformer.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import ReformerConfig, ReformerModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--train", action="store_true",
                        help="training mode: model.train(), gradients on, a backward step per call (library ports are "
                             "proven in both modes: bench/hf_rewrites.py --mode)")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = ReformerConfig(
        vocab_size=32, hidden_size=16, num_attention_heads=2, attention_head_size=8, feed_forward_size=32,
        attn_layers=["local", "lsh"], axial_pos_embds=True, axial_pos_shape=(4, 8), axial_pos_embds_dim=(8, 8),
        max_position_embeddings=32, local_attn_chunk_length=8, lsh_attn_chunk_length=8, num_buckets=4, num_hashes=1,
        is_decoder=False, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    model = ReformerModel(config).train(args.train)
    compiled = torch.compile(model, backend=args.backend)
    input_ids = torch.randint(0, 32, (2, 32))
    with torch.set_grad_enabled(args.train):
        for _ in range(args.calls):
            out = compiled(input_ids=input_ids).last_hidden_state
            if args.train:
                out.float().pow(2).mean().backward()
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
