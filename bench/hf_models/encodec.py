"""EnCodec (neural audio codec: encoder, residual vector quantizer, decoder) from a tiny config, eval mode, a few compiled forwards.

    python bench/hf_models/encodec.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import EncodecConfig, EncodecModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--train", action="store_true",
                        help="training mode: model.train(), gradients on, a backward step per call (library ports are "
                             "proven in both modes: bench/hf_rewrites.py --mode)")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = EncodecConfig(
        target_bandwidths=[1.5], sampling_rate=800, audio_channels=1, hidden_size=8, num_filters=4,
        num_residual_layers=1, upsampling_ratios=[2, 2], codebook_size=16, num_lstm_layers=1,
    )
    model = EncodecModel(config).train(args.train)
    compiled = torch.compile(model, backend=args.backend)
    input_values = torch.randn(2, 1, 64)
    with torch.set_grad_enabled(args.train):
        for _ in range(args.calls):
            out = compiled(input_values).audio_values
            if args.train:
                out.float().pow(2).mean().backward()
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
