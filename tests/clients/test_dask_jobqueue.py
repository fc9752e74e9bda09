"""dask-jobqueue (https://jobqueue.dask.org): a SLURMCluster submits one sbatch job per
worker (a temporary script it deletes once sbatch returns), workers connect back to the
scheduler, computations run on them, and ``close()`` scancels the jobs."""

import time

import pytest
from dask.distributed import Client
from dask_jobqueue import SLURMCluster


def inc(x):
    return x + 1


def where():
    import os

    return (os.environ["SLURM_JOB_ID"], os.environ["SLURMD_NODENAME"])


@pytest.fixture
def slurm_cluster(cluster):
    c = SLURMCluster(
        cores=1,
        processes=1,
        memory="400MiB",
        walltime="00:10:00",
        job_name="dask-worker",
        log_directory=str(cluster.work / "logs"),
        local_directory=str(cluster.work / "scratch"),
        scheduler_options={"host": "127.0.0.1"},
        job_extra_directives=["--mail-type=NONE"],
    )
    yield c
    c.close()


def test_cluster_scales_up_and_computes(cluster, slurm_cluster):
    script = slurm_cluster.job_script()
    assert "#SBATCH -J dask-worker" in script
    assert "#SBATCH --mem=" in script
    slurm_cluster.scale(jobs=2)
    with Client(slurm_cluster) as client:
        client.wait_for_workers(2, timeout=180)
        futures = client.map(inc, range(20))
        assert client.gather(futures) == list(range(1, 21))
        total = client.submit(sum, futures)
        assert total.result() == sum(range(1, 21))
        placed = set(client.run(where).values())
    # Each worker is its own sbatch job, running under the scheduler.
    job_ids = {j for j, _ in placed}
    assert len(job_ids) == 2
    for j in job_ids:
        rows = cluster.sacct(j, "JobID,JobName,State")
        assert rows == [{"JobID": j, "JobName": "dask-worker", "State": "RUNNING"}], rows
    nodes = {n for _, n in placed}
    assert nodes <= set(cluster.nodes), nodes
    slurm_cluster.close()
    for j in job_ids:
        assert cluster.wait_done(j)[j] in ("CANCELLED", "COMPLETED")


def test_adapt_scales_down_to_zero(cluster, slurm_cluster):
    slurm_cluster.adapt(minimum_jobs=0, maximum_jobs=1, interval="500ms", wait_count=2)
    with Client(slurm_cluster) as client:
        assert client.submit(inc, 41).result(timeout=180) == 42
    # Idle: the adaptive loop retires the worker and its job ends.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        out = cluster.run("squeue", "-h", "--me", "-n", "dask-worker", "-o", "%i").stdout
        if out.strip() == "":
            break
        time.sleep(0.5)
    assert out.strip() == "", out
