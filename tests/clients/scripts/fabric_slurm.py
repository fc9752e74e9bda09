"""Run under `srun` inside an allocation: Lightning's SLURMEnvironment and a Fabric DDP
launch on CPU (gloo); prints one `RESULT {json}` line per task."""

import json
import os
import sys

import torch
from lightning_fabric import Fabric
from lightning_fabric.plugins.environments import SLURMEnvironment

nodes, per_node = int(sys.argv[1]), int(sys.argv[2])
env = SLURMEnvironment()
info = {
    "detect": SLURMEnvironment.detect(),
    "job_name": SLURMEnvironment.job_name(),
    "world": env.world_size(),
    "rank": env.global_rank(),
    "local": env.local_rank(),
    "node": env.node_rank(),
    "addr": env.main_address,
    "port": env.main_port,
    "hostname": os.environ.get("SLURMD_NODENAME"),
}
env.validate_settings(num_devices=per_node, num_nodes=nodes)
fabric = Fabric(accelerator="cpu", devices=per_node, num_nodes=nodes, strategy="ddp")
fabric.launch()
# The inputs stay referenced until exit (see gloo_allreduce.py: torch 2.5's gloo group
# must not free a Python-owned tensor from its worker thread while being destroyed).
one = torch.tensor(float(fabric.global_rank + 1))
total = fabric.all_reduce(one, reduce_op="sum")
mine = torch.tensor([fabric.global_rank])
gathered = fabric.all_gather(mine)
info.update(
    fabric_env=type(fabric.strategy.cluster_environment).__name__,
    fabric_rank=fabric.global_rank,
    fabric_local=fabric.local_rank,
    fabric_node=fabric.node_rank,
    fabric_world=fabric.world_size,
    sum=total.item(),
    gathered=sorted(gathered.flatten().tolist()),
)
# One write per line: processes sharing the step's stdout (torchrun's workers) must not
# interleave a line and its newline (PYTHONUNBUFFERED makes print write them apart).
sys.stdout.write("RESULT " + json.dumps(info) + "\n")
sys.stdout.flush()
