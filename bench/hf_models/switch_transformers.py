"""Switch Transformers (mixture of experts, encoder-decoder) from a tiny config, eval mode, a few compiled forwards.

    python bench/hf_models/switch_transformers.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import SwitchTransformersConfig, SwitchTransformersModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--train", action="store_true",
                        help="training mode: model.train(), gradients on, a backward step per call (library ports are "
                             "proven in both modes: bench/hf_rewrites.py --mode)")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = SwitchTransformersConfig(
        vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_heads=2, num_layers=2, num_sparse_encoder_layers=1,
        encoder_sparse_step=1, num_decoder_layers=1, num_sparse_decoder_layers=1, decoder_sparse_step=1,
        num_experts=2, expert_capacity=4, dropout_rate=0.0,
    )
    model = SwitchTransformersModel(config).train(args.train)
    compiled = torch.compile(model, backend=args.backend)
    input_ids = torch.randint(0, 32, (2, 8))
    decoder_input_ids = torch.randint(0, 32, (2, 4))
    with torch.set_grad_enabled(args.train):
        for _ in range(args.calls):
            out = compiled(input_ids=input_ids, decoder_input_ids=decoder_input_ids).last_hidden_state
            if args.train:
                out.float().pow(2).mean().backward()
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
