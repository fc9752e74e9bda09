"""submitit (https://github.com/facebookincubator/submitit), used as its README shows:
an AutoExecutor on a ``%j`` log folder (created only after sbatch returns), results and
exceptions come back through pickles, states through ``sacct``, arrays through
``map_array``, several tasks through ``srun``, and preemption through ``scancel
--signal`` and an in-job ``scontrol requeue``."""

import os
import time

import pytest
import submitit
from submitit.core.utils import FailedJobError


@pytest.fixture(autouse=True)
def fresh_watcher():
    """submitit keeps one sacct watcher per process that caches finished jobs' states by
    id; the personal and system clusters of this suite reuse ids, so each test starts
    with an empty cache (as a new submitit process would)."""
    submitit.slurm.slurm.SlurmJob.watcher.clear()
    yield


def add(a, b):
    return a + b


def boom(msg):
    raise ValueError(msg)


def square(x):
    return x * x


def whoami():
    env = submitit.JobEnvironment()
    return (env.global_rank, env.local_rank, env.num_tasks, env.num_nodes, env.node, os.environ["SLURMD_NODENAME"], list(env.hostnames))


def wait_state(job, want, timeout=60):
    """Polls sacct through submitit until the job's state is ``want``; returns it. A
    result pickle can exist a moment before the job has ended, as on Slurm."""
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = job.get_info(mode="force").get("State", "UNKNOWN")
        if state == want:
            break
        time.sleep(0.3)
    return state


def executor(cluster, **params):
    ex = submitit.AutoExecutor(folder=cluster.work / "logs" / "%j")
    assert ex.cluster == "slurm"
    ex.update_parameters(timeout_min=10, cpus_per_task=1, mem_gb=0.2, **params)
    return ex


def test_submit_returns_the_result_and_job_ends_completed(cluster):
    ex = executor(cluster, name="adder")
    job = ex.submit(add, 2, 3)
    assert job.result() == 5
    assert wait_state(job, "COMPLETED") == "COMPLETED"
    assert job.done()
    assert "adder" == cluster.sacct(job.job_id, "JobName")[0]["JobName"]
    # The log folder named after the job holds submitit's own files.
    folder = cluster.work / "logs" / job.job_id
    assert (folder / f"{job.job_id}_0_result.pkl").exists()
    assert "Job completed successfully" in job.stdout()


def test_a_raising_function_raises_on_result(cluster):
    ex = executor(cluster)
    job = ex.submit(boom, "expected failure 42")
    with pytest.raises(FailedJobError, match="ValueError: expected failure 42"):
        job.result()
    assert isinstance(job.exception(), FailedJobError)
    # submitit's wrapper re-raises after pickling the exception: the job fails.
    assert wait_state(job, "FAILED") == "FAILED"


def test_map_array_runs_an_array_and_returns_results_in_order(cluster):
    ex = executor(cluster, slurm_array_parallelism=2)
    jobs = ex.map_array(square, [1, 2, 3, 4])
    assert len(jobs) == 4
    master = jobs[0].job_id.split("_")[0]
    assert [j.job_id for j in jobs] == [f"{master}_{i}" for i in range(4)]
    assert [j.result() for j in jobs] == [1, 4, 9, 16]
    assert {wait_state(j, "COMPLETED") for j in jobs} == {"COMPLETED"}
    states = cluster.wait_done(master)
    assert states == {f"{master}_{i}": "COMPLETED" for i in range(4)}


def test_batch_context_submits_one_array(cluster):
    ex = executor(cluster)
    with ex.batch():
        jobs = [ex.submit(add, i, 10) for i in range(3)]
    assert len({j.job_id.split("_")[0] for j in jobs}) == 1
    assert [j.result() for j in jobs] == [10, 11, 12]


def test_several_tasks_see_their_ranks(cluster):
    if cluster.mode == "system":
        ex = executor(cluster, nodes=2, tasks_per_node=1)
    else:
        ex = executor(cluster, nodes=1, tasks_per_node=2)
    job = ex.submit(whoami)
    results = job.results()
    assert len(results) == 2
    ranks = sorted(r[0] for r in results)
    assert ranks == [0, 1]
    assert {r[2] for r in results} == {2}
    if cluster.mode == "system":
        assert {r[3] for r in results} == {2}
        assert sorted(r[4] for r in results) == [0, 1]
        assert {r[1] for r in results} == {0}
        nodes = sorted(r[5] for r in results)
        assert len(set(nodes)) == 2 and set(nodes) <= set(cluster.nodes), nodes
        # submitit's own hostlist parser on SLURM_JOB_NODELIST.
        assert {tuple(r[6]) for r in results} == {tuple(nodes)}
    else:
        assert {r[3] for r in results} == {1}
        assert sorted(r[1] for r in results) == [0, 1]


def test_cancel_ends_the_job_cancelled(cluster):
    ex = executor(cluster)
    job = ex.submit(time.sleep, 300)
    assert wait_state(job, "RUNNING") == "RUNNING"
    job.cancel()
    # sacct says `CANCELLED by <uid>`, as Slurm's does; submitit passes it through.
    assert wait_state(job, f"CANCELLED by {os.getuid()}") == f"CANCELLED by {os.getuid()}"
    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()


class Resumable(submitit.helpers.Checkpointable):
    """Blocks on its first run; resumed (after preemption) it returns what it saw."""

    def __call__(self, marker, resumed=0):
        if resumed:
            return ("resumed", resumed, int(os.environ.get("SLURM_RESTART_COUNT", "0")))
        with open(marker, "w") as f:
            f.write(os.environ["SLURM_JOB_ID"])
        time.sleep(300)
        return ("not preempted",)

    def checkpoint(self, marker, resumed=0):
        return submitit.helpers.DelayedSubmission(self, marker, resumed + 1)


def test_preemption_checkpoints_requeues_and_resumes(cluster):
    ex = executor(cluster)
    marker = cluster.work / "started"
    job = ex.submit(Resumable(), str(marker))
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), job.stderr()
    # scancel --signal SIGTERM then USR2, as SLURM does on preemption; submitit's
    # handler checkpoints and runs `scontrol requeue $SLURM_JOB_ID` inside the job.
    job._interrupt()
    assert job.result() == ("resumed", 1, 1), job.stderr()
    assert wait_state(job, "COMPLETED") == "COMPLETED"
