"""PyTorch on CPU under srun: Lightning's SLURMEnvironment and a Fabric DDP launch
(https://lightning.ai/docs/fabric/stable/guide/multi_node/slurm.html), a plain
torch.distributed gloo rendezvous at the first node of the allocation (the usual
``scontrol show hostnames`` recipe), and torchrun's c10d rendezvous started by one srun
task per node. Personal mode: one node, two tasks; system mode: two nodes."""

import json
import pathlib
import sys

SCRIPTS = pathlib.Path(__file__).resolve().parent / "scripts"

MASTER = (
    'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
    "export MASTER_PORT=$((15000 + SLURM_JOB_ID % 10000))\n"
)


def layout(cluster):
    """(nodes, tasks per node) of the allocation."""
    return (2, 1) if cluster.mode == "system" else (1, 2)


def run_batch(cluster, name, body, *args):
    script = cluster.work / f"{name}.sh"
    script.write_text("#!/bin/bash\nset -e\n" + body)
    out = cluster.work / f"{name}.out"
    job = cluster.run(
        "sbatch", "--parsable", "-t", "10", "-o", str(out), *args, str(script)
    ).stdout.strip()
    states = cluster.wait_done(job, timeout=300)
    text = out.read_text() if out.exists() else ""
    assert states == {job: "COMPLETED"}, text
    results = [json.loads(line[len("RESULT "):]) for line in text.splitlines() if line.startswith("RESULT ")]
    return job, results, text


def test_lightning_slurm_environment_and_fabric_ddp(cluster):
    nodes, per_node = layout(cluster)
    job, results, text = run_batch(
        cluster,
        "fabric",
        f"srun {sys.executable} {SCRIPTS}/fabric_slurm.py {nodes} {per_node}\n",
        f"--nodes={nodes}",
        f"--ntasks-per-node={per_node}",
        "--cpus-per-task=1",
        "--job-name=fabric",
    )
    world = nodes * per_node
    assert len(results) == world, text
    first = cluster.run("scontrol", "show", "hostnames", cluster.sacct(job, "NodeList")[0]["NodeList"]).stdout.split()[0]
    for r in results:
        assert r["detect"] is True
        assert r["job_name"] == "fabric"
        assert r["world"] == world
        assert r["addr"] == first
        assert r["port"] == 15000 + int(job[-4:])
        assert r["fabric_env"] == "SLURMEnvironment"
        assert r["fabric_world"] == world
        assert r["fabric_rank"] == r["rank"]
        assert r["fabric_local"] == r["local"]
        assert r["fabric_node"] == r["node"]
        assert r["sum"] == world * (world + 1) / 2
        assert r["gathered"] == list(range(world))
    assert sorted(r["rank"] for r in results) == list(range(world))
    assert sorted((r["node"], r["local"]) for r in results) == [
        (n, l) for n in range(nodes) for l in range(per_node)
    ]
    if cluster.mode == "system":
        hosts = {r["hostname"] for r in results}
        assert len(hosts) == 2 and first in hosts, hosts


def test_gloo_all_reduce_across_srun_tasks(cluster):
    nodes, per_node = layout(cluster)
    world = nodes * per_node
    job, results, text = run_batch(
        cluster,
        "gloo",
        MASTER + f"srun {sys.executable} {SCRIPTS}/gloo_allreduce.py\n",
        f"--nodes={nodes}",
        f"--ntasks={world}",
    )
    assert len(results) == world, text
    assert sorted(r["rank"] for r in results) == list(range(world))
    for r in results:
        assert r["world"] == world
        assert r["sum"] == world * (world + 1) / 2
        assert r["gathered"] == [float(i) for i in range(world)]
        assert r["master"] == results[0]["master"]
    assert len({r["node"] for r in results}) == nodes


def test_torchrun_c10d_rendezvous_one_agent_per_node(cluster):
    nodes = layout(cluster)[0]
    per_node = 2
    world = nodes * per_node
    # torchrun's c10d backend picks the agent that hosts its store by comparing the
    # endpoint's name with the machine's hostname (torch.distributed.elastic's
    # _matches_machine_hostname). In system mode the nodes cn1-cn3 are one machine
    # whose hostname is none of them, so the endpoint is given as the first node's
    # address: a loopback address makes every agent try to host, and all but the
    # first fall back to clients (on a real cluster the node name matches).
    endpoint = (
        'export MASTER_ADDR=$(getent ahostsv4 "$MASTER_ADDR" | head -n 1 | cut -d" " -f1)\n'
        if cluster.mode == "system"
        else ""
    )
    job, results, text = run_batch(
        cluster,
        "torchrun",
        MASTER
        + endpoint
        + f"srun {pathlib.Path(sys.executable).parent}/torchrun --nnodes=$SLURM_NNODES "
        f"--nproc-per-node={per_node} --rdzv-id=$SLURM_JOB_ID --rdzv-backend=c10d "
        f"--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT {SCRIPTS}/gloo_allreduce.py\n",
        f"--nodes={nodes}",
        "--ntasks-per-node=1",
        "--cpus-per-task=2",
    )
    assert len(results) == world, text
    assert sorted(r["rank"] for r in results) == list(range(world))
    for r in results:
        assert r["world"] == world
        assert r["sum"] == world * (world + 1) / 2
    assert len({r["node"] for r in results}) == nodes
