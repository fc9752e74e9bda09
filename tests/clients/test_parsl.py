"""Parsl (https://parsl.readthedocs.io): a HighThroughputExecutor whose blocks come from a
SlurmProvider (sbatch of a generated script, state through sacct or squeue, scancel at
shutdown) and whose worker pools start under ``srun`` (SrunLauncher), one per node."""

import os

import parsl
import pytest
from parsl.app.app import python_app
from parsl.config import Config
from parsl.executors import HighThroughputExecutor
from parsl.launchers import SrunLauncher
from parsl.providers import SlurmProvider


@python_app
def double(x):
    return 2 * x


@python_app
def placement():
    import os

    return (os.environ["SLURM_JOB_ID"], os.environ["SLURMD_NODENAME"], os.environ["SLURM_NNODES"])


@python_app
def divide(a, b):
    return a / b


@pytest.fixture
def dfk(cluster):
    nodes = 2 if cluster.mode == "system" else 1
    provider = SlurmProvider(
        partition="debug",
        nodes_per_block=nodes,
        init_blocks=1,
        min_blocks=0,
        max_blocks=1,
        walltime="00:10:00",
        exclusive=False,
        launcher=SrunLauncher(),
        worker_init=f"export PATH={os.environ['PATH']}",
    )
    executor = HighThroughputExecutor(
        label="htex_slurm",
        max_workers_per_node=1,
        cores_per_worker=1,
        provider=provider,
    )
    d = parsl.load(Config(executors=[executor], run_dir=str(cluster.work / "runinfo"), strategy="none"))
    d.nodes = nodes
    yield d
    d.cleanup()
    parsl.clear()


def test_python_apps_run_in_a_slurm_block(cluster, dfk):
    assert [f.result(timeout=300) for f in [double(i) for i in range(6)]] == [0, 2, 4, 6, 8, 10]
    job, node, nnodes = placement().result(timeout=120)
    assert node in cluster.nodes
    assert int(nnodes) == dfk.nodes
    row = cluster.sacct(job, "JobID,State,NNodes")
    assert row == [{"JobID": job, "State": "RUNNING", "NNodes": str(dfk.nodes)}], row
    # The provider's own view of its block comes from sacct/squeue.
    provider = dfk.executors["htex_slurm"].provider
    status = provider.status(list(provider.resources.keys()))
    assert [s.state.name for s in status] == ["RUNNING"], status


def test_an_app_exception_is_raised_by_its_future(cluster, dfk):
    assert divide(6, 3).result(timeout=300) == 2
    with pytest.raises(ZeroDivisionError):
        divide(1, 0).result(timeout=120)


def test_cleanup_cancels_the_block(cluster, dfk):
    job, _, _ = placement().result(timeout=300)
    dfk.cleanup()
    parsl.clear()
    assert cluster.wait_done(job)[job] in ("CANCELLED", "COMPLETED")
    # The fixture's second cleanup must be harmless.
    dfk.cleanup = lambda: None
