"""Wav2Vec2 from a tiny config, one training-mode forward, built from modeling.py beside this file
(transformers 5.24's modeling_wav2vec2.py): graph breaks inside loops, skipped frames."""

import torch
from modeling import Wav2Vec2ForCTC
from transformers import Wav2Vec2Config

torch.manual_seed(0)
config = Wav2Vec2Config(
    hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=12,
    conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
    num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
    mask_time_prob=0.5, mask_time_length=2,  # SpecAugment masking: its mask loop breaks
)
model = Wav2Vec2ForCTC(config).train()  # LayerDrop's data-dependent branch only runs in training
compiled = torch.compile(model, backend="eager")
print(tuple(compiled(torch.randn(2, 800)).logits.shape))
