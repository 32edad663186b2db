"""Switch Transformers (mixture of experts) from a tiny config, built from modeling.py beside this file:
one version of transformers' modeling_switch_transformers.py (the edit corpus's real edit history)."""

import torch
from modeling import SwitchTransformersEncoderModel
from transformers import SwitchTransformersConfig

torch.manual_seed(0)
config = SwitchTransformersConfig(
    vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_heads=2, num_layers=2, num_sparse_encoder_layers=1,
    encoder_sparse_step=1, num_decoder_layers=0, num_sparse_decoder_layers=0, num_experts=2, expert_capacity=4,
)
model = SwitchTransformersEncoderModel(config).eval()
compiled = torch.compile(model, backend="eager")
with torch.no_grad():
    print(tuple(compiled(torch.randint(0, 32, (1, 6))).last_hidden_state.shape))
