"""I-BERT (integer-only quantized BERT) from a tiny config, quant mode on, eval mode, a few compiled forwards.

    python bench/hf_models/ibert.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import IBertConfig, IBertModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--train", action="store_true",
                        help="training mode: model.train(), gradients on, a backward step per call (library ports are "
                             "proven in both modes: bench/hf_rewrites.py --mode)")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = IBertConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=64, quant_mode=True, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    model = IBertModel(config).train(args.train)
    compiled = torch.compile(model, backend=args.backend)
    input_ids = torch.randint(2, 32, (2, 16))
    with torch.set_grad_enabled(args.train):
        for _ in range(args.calls):
            out = compiled(input_ids=input_ids).last_hidden_state
            if args.train:
                out.float().pow(2).mean().backward()
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
