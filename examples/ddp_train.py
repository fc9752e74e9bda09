"""A minimal torch DistributedDataParallel job for the ddp-*.sbatch examples.

It reads its place from the environment (env:// rendezvous): RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT. sluice sets MASTER_ADDR and MASTER_PORT for
every step that has GPUs; the job scripts map SLURM_PROCID etc. to RANK etc. (srun) or
let torchrun do it.
"""
import os
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    # Each task sees only its own GPUs (CUDA_VISIBLE_DEVICES), numbered from 0.
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    model = DDP(torch.nn.Linear(1024, 1024).cuda(), device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(20):
        opt.zero_grad()
        loss = model(torch.randn(64, 1024, device="cuda")).square().mean()
        loss.backward()
        opt.step()
    # Every rank ends with the same weights: the all-reduce worked.
    w = model.module.weight.detach().sum()
    dist.all_reduce(w, op=dist.ReduceOp.MAX)
    print(
        f"rank {rank}/{world} on {socket.gethostname()} "
        f"GPU {os.environ.get('CUDA_VISIBLE_DEVICES')} "
        f"({torch.cuda.get_device_name()}): loss {loss.item():.4f}",
        flush=True,
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
