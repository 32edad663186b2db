"""BigBird-Pegasus (block-sparse attention, encoder-decoder) from a tiny config, eval mode, a few compiled forwards.

    python bench/hf_models/bigbird_pegasus.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import BigBirdPegasusConfig, BigBirdPegasusModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--train", action="store_true",
                        help="training mode: model.train(), gradients on, a backward step per call (library ports are "
                             "proven in both modes: bench/hf_rewrites.py --mode)")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = BigBirdPegasusConfig(
        vocab_size=32, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=128,
        attention_type="block_sparse", block_size=4, num_random_blocks=2, dropout=0.0, attention_dropout=0.0,
    )
    model = BigBirdPegasusModel(config).train(args.train)
    compiled = torch.compile(model, backend=args.backend)
    input_ids = torch.randint(2, 32, (2, 64))
    decoder_input_ids = torch.randint(2, 32, (2, 8))
    with torch.set_grad_enabled(args.train):
        for _ in range(args.calls):
            out = compiled(input_ids=input_ids, decoder_input_ids=decoder_input_ids).last_hidden_state
            if args.train:
                out.float().pow(2).mean().backward()
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
