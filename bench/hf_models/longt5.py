"""LongT5 (transient-global attention, encoder-decoder) from a tiny config, eval mode, a few compiled forwards.

    python bench/hf_models/longt5.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import LongT5Config, LongT5Model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = LongT5Config(
        vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=2,
        local_radius=2, global_block_size=4, encoder_attention_type="transient-global", dropout_rate=0.0,
    )
    model = LongT5Model(config).eval()
    compiled = torch.compile(model, backend=args.backend)
    input_ids = torch.randint(0, 32, (2, 16))
    attention_mask = torch.ones_like(input_ids)  # without it the compiled encoder fails (the mask stays None)
    decoder_input_ids = torch.randint(0, 32, (2, 4))
    with torch.no_grad():
        for _ in range(args.calls):
            out = compiled(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).last_hidden_state
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
