"""Mamba (selective state-space model) from a tiny config, eval mode, the slow path (no CUDA kernels), a few compiled forwards.

    python bench/hf_models/mamba.py [--backend eager|aot_eager|inductor] [--calls 3]
"""

import argparse

import torch
from transformers import MambaConfig, MambaModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = MambaConfig(
        vocab_size=32, hidden_size=16, state_size=4, num_hidden_layers=2, expand=2, conv_kernel=2,
        use_mambapy=False,
    )
    model = MambaModel(config).eval()
    compiled = torch.compile(model, backend=args.backend)
    input_ids = torch.randint(0, 32, (2, 8))
    with torch.no_grad():
        for _ in range(args.calls):
            out = compiled(input_ids=input_ids).last_hidden_state
    print(f"output mean abs: {out.abs().mean().item():.6f}")


if __name__ == "__main__":
    main()
