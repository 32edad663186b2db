"""The rewrite catalogue on real torch.compile runs: a program breaks, torch names the line, the
catalogue rewrites the file, and the rewritten program compiles with fewer breaks and the same
outputs. The break site handed to the catalogue is the one torch reported, not one written here.

One small program per rule family, each compiled twice with backend="eager" (seconds each).
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import torch

from dynscope.rewrites import BreakSite
from dynscope.rewrites.catalogue import rewrites_for

PROGRAMS = {
    "tensor-where": '''
        import torch

        def forward(x):
            if x.sum() > 0:
                y = x * 2
            else:
                y = x - 1
            return y + 1
        ''',
    "tensor-cond": '''
        import torch

        def forward(x):
            if x.sum() > 0:
                h = x.relu()
                y = h * 2
            else:
                y = x - 1
            return y + 1
        ''',
    "guard-to-check": '''
        import torch

        def forward(x):
            if (x > 100).any():
                raise ValueError("input out of range")
            return x * 3
        ''',
    "keep-tensor": '''
        import torch

        def forward(x):
            scale = x.abs().max().item()
            return x / scale + 1
        ''',
    "numpy-int-math": '''
        import numpy as np
        import torch

        def chunk_length(a, b):
            return np.lcm(a, b)

        def forward(x):
            chunk = chunk_length(2, 4)
            if x.shape[-1] % chunk != 0:
                return x + 1
            return x * 2
        ''',
    "drop-requires-grad": '''
        import torch

        def forward(x):
            y = x * 2
            y.requires_grad_()
            return y + 1
        ''',
}


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(path: Path, name: str, x: torch.Tensor) -> tuple[torch.Tensor, list[BreakSite]]:
    """The compiled program's output on ``x`` and the breaks torch reported in ``path``."""
    torch._dynamo.reset()
    forward = _load(path, name).forward
    explained = torch._dynamo.explain(forward)(x)
    sites = []
    for reason in explained.break_reasons:
        frames = [frame for frame in reason.user_stack if Path(frame.filename) == path]
        if frames:
            headline, _, rest = reason.reason.partition("\n")
            sites.append(BreakSite(line=frames[-1].lineno, gb_type=headline, reason=rest or headline))
    torch._dynamo.reset()
    return torch.compile(forward, backend="eager")(x), sites


@pytest.mark.parametrize("rule", sorted(PROGRAMS))
def test_the_rewrite_removes_the_break_torch_reported_with_equal_outputs(rule: str, tmp_path: Path) -> None:
    before = tmp_path / "before.py"
    before.write_text(textwrap.dedent(PROGRAMS[rule]).lstrip("\n"), encoding="utf-8")
    x = torch.linspace(-1.0, 2.0, 8)
    eager = _load(before, f"before_{rule.replace('-', '_')}").forward(x)

    compiled, sites = _run(before, f"before_c_{rule.replace('-', '_')}", x)
    assert sites, "the program must break before the rewrite"
    assert torch.allclose(compiled, eager)

    candidates = {r.rule: r for r in rewrites_for(before.read_text(encoding="utf-8"), sites[0])}
    assert rule in candidates, f"{rule} did not answer {sites[0]}; got {sorted(candidates)}"

    after = tmp_path / "after.py"
    after.write_text(candidates[rule].source, encoding="utf-8")
    if candidates[rule].settings:
        pytest.fail("a rewrite that needs settings is not exercised here")
    rewritten, sites_after = _run(after, f"after_{rule.replace('-', '_')}", x)
    assert sites_after == [], f"still breaks: {sites_after}"
    assert torch.allclose(rewritten, eager)
