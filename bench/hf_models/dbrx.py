"""DBRX (mixture-of-experts LM) from a tiny config, eval mode, a few compiled forwards.

    python bench/hf_models/dbrx.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import DbrxConfig, DbrxModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--train", action="store_true",
                        help="training mode: model.train(), gradients on, a backward step per call (library ports are "
                             "proven in both modes: bench/hf_rewrites.py --mode)")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = DbrxConfig(
        vocab_size=32, d_model=16, n_heads=2, n_layers=2, max_seq_len=32,
        attn_config={"kv_n_heads": 1, "clip_qkv": 8.0, "rope_theta": 10000.0},
        ffn_config={"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2},
    )
    model = DbrxModel(config).train(args.train)
    compiled = torch.compile(model, backend=args.backend)
    input_ids = torch.randint(0, 32, (2, 8))
    with torch.set_grad_enabled(args.train):
        for _ in range(args.calls):
            out = compiled(input_ids=input_ids).last_hidden_state
            if args.train:
                out.float().pow(2).mean().backward()
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
