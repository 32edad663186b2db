"""Ranks that compile differently (gloo, CPU, backend="eager").

Only rank 1 graph-breaks (a print() inside the compiled step), so its all_reduce runs in
a different graph than on the other ranks; only rank 1 then calls with a new shape, so it
alone recompiles. Every rank still issues the same collectives, so the program finishes.
"""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()


def step(x):
    y = x.sin()
    if rank == 1:
        print(f"rank {rank} extra work")  # a graph break on rank 1 only
    total = y.sum().reshape(1)  # the same size on every rank, whatever x's shape
    dist.all_reduce(total)
    return y * total


compiled = torch.compile(step, backend="eager")
compiled(torch.ones(4))
compiled(torch.ones(8 if rank == 1 else 4))  # a recompile on rank 1 only
print(f"rank {rank} done")
dist.destroy_process_group()
