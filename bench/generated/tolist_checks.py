"""Does a `.tolist()` feeding `split` need `torch._check`ed sizes, or is `capture_scalar_outputs` enough?

JetMoe's router (the tuned half) is the shape: `expert_size = expert_size.tolist()`, then
`inputs.split(expert_size, dim=0)` in the experts' forward. Each variant runs the generated bench's program
(program.py: two eval forwards and a training step per call, backend eager) in a process of its own and prints
Dynamo's graph-break count and whether the last call's lines equal eager's:

    python bench/generated/tolist_checks.py [--calls 2]

Variants: as it is; `capture_scalar_outputs = True`; the setting and `torch._check(size >= 0)` on each size
right after the `.tolist()` (written into JetMoe's module for that process only).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

SPEC = "transformers:JetMoeModel"
TOLIST = "        expert_size = expert_size.tolist()\n"
CHECKS = "        for size in expert_size:\n            torch._check(size >= 0)\n"
VARIANTS = {"as it is": [], "capture_scalar_outputs": ["--setting"], "the setting + torch._check sizes": ["--setting", "--checks"]}


def child(calls: int, setting: bool, checks: bool) -> None:
    import torch
    import torch._dynamo
    from build import build
    from program import one_call
    from torch._dynamo.utils import counters

    if checks:
        import inspect

        import transformers.models.jetmoe.modeling_jetmoe as jetmoe

        source = inspect.getsource(jetmoe)
        if TOLIST not in source:
            sys.exit("this transformers' JetMoe has no `expert_size = expert_size.tolist()` line")
        exec(compile(source.replace(TOLIST, TOLIST + CHECKS), jetmoe.__file__, "exec"), jetmoe.__dict__)
    built = build(SPEC)
    eager = one_call(built.model, built)
    torch._dynamo.config.capture_scalar_outputs = setting
    compiled = torch.compile(built.model, backend="eager")
    lines: list[str] = []
    for _ in range(calls):
        lines = one_call(compiled, built)
    print(sum(counters["graph_break"].values()), "equal" if lines == eager else "differ")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--setting", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.calls, args.setting, args.checks)
        return
    print(f"{SPEC}, {args.calls} calls, backend eager")
    for name, flags in VARIANTS.items():
        done = subprocess.run([sys.executable, __file__, "--child", "--calls", str(args.calls), *flags],
                              capture_output=True, text=True, check=False)
        last = done.stdout.strip().splitlines()[-1:] or [f"failed: {done.stderr.strip().splitlines()[-1:]}"]
        breaks, _, outputs = last[0].partition(" ")
        print(f"  {name:34} graph breaks {breaks:>3}   outputs vs eager: {outputs}")


if __name__ == "__main__":
    main()
