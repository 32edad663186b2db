"""Two ranks (gloo, CPU) compile a step; rank 1 also hits a graph break."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()


def step(x):
    y = x.sin() * 2
    if rank == 1:
        print(f"rank {rank} extra work")  # a graph break on rank 1 only
    return y + 1


out = torch.compile(step, backend="eager")(torch.ones(4) * rank)
dist.all_reduce(out)
print(f"rank {rank}: {out.tolist()}")
dist.destroy_process_group()
