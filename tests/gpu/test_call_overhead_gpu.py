"""Per-call overhead on an NVIDIA GPU: dynscope's replayed cache lookup of a compiled module
whose inputs and weights are CUDA tensors agrees with torch.profiler's "TorchDynamo Cache Lookup"
(within 20%) on the same run. Skipped without CUDA. Run on the GPU machine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))
from test_call_overhead import assert_lookup_agrees  # noqa: E402


def test_replayed_lookup_agrees_with_torch_profiler_on_cuda(tmp_path):
    assert_lookup_agrees(tmp_path, "cuda")
