"""A torch.distributed gloo rendezvous on CPU: ranks from SLURM (srun) or from torchrun
(RANK/WORLD_SIZE), the store at MASTER_ADDR:MASTER_PORT; prints `RESULT {json}`."""

import json
import os
import sys

import torch
import torch.distributed as dist

if "RANK" in os.environ:  # torchrun
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
else:
    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
# Every tensor handed to a collective stays referenced from Python until the group is
# destroyed: torch 2.5's ProcessGroupGloo destructor joins its worker thread while
# holding the GIL, and a worker dropping the last reference to a tensor needs the GIL
# to free it (a deadlock seen once in a few runs).
t = torch.tensor([rank + 1.0])
dist.all_reduce(t, op=dist.ReduceOp.SUM)
parts = [torch.zeros(1) for _ in range(world)]
mine = torch.tensor([float(rank)])
dist.all_gather(parts, mine)
# One write per line: torchrun's workers share the step's stdout, and print() under
# PYTHONUNBUFFERED writes a line and its newline apart (lines of two ranks interleave).
line = "RESULT " + json.dumps(
    {
        "rank": rank,
        "world": world,
        "sum": t.item(),
        "gathered": [p.item() for p in parts],
        "node": os.environ["SLURMD_NODENAME"],
        "master": os.environ["MASTER_ADDR"],
    }
)
sys.stdout.write(line + "\n")
sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()
