"""BERT from a tiny config, called with four sequence lengths until it hits the recompile limit.

The limit is lowered to 2 and automatic dynamic shapes are off, so every new length recompiles
and the third one hits the limit after two cheap recompiles.
"""

import sys

import torch
from transformers import BertConfig, BertModel

torch.manual_seed(0)
torch._dynamo.config.recompile_limit = 2
torch._dynamo.config.automatic_dynamic_shapes = False
config = BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                    vocab_size=50, max_position_embeddings=32)
model = BertModel(config).eval()
compiled = torch.compile(model, backend=sys.argv[1] if len(sys.argv) > 1 else "eager")
with torch.no_grad():
    for length in (4, 5, 6, 7):
        print(tuple(compiled(torch.randint(0, 50, (1, length))).last_hidden_state.shape))
