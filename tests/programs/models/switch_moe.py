"""Switch Transformers (mixture of experts) from a tiny config: a dynamic-shape break in the expert loop."""

import sys

import torch
from transformers import SwitchTransformersConfig, SwitchTransformersEncoderModel

torch.manual_seed(0)
config = SwitchTransformersConfig(
    vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_heads=2, num_layers=2, num_sparse_encoder_layers=1,
    encoder_sparse_step=1, num_decoder_layers=0, num_sparse_decoder_layers=0, num_experts=2, expert_capacity=4,
)
model = SwitchTransformersEncoderModel(config).eval()
compiled = torch.compile(model, backend=sys.argv[1] if len(sys.argv) > 1 else "eager")
with torch.no_grad():
    print(tuple(compiled(torch.randint(0, 32, (1, 6))).last_hidden_state.shape))
