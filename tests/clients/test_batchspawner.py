"""batchspawner's SlurmSpawner (https://github.com/jupyterhub/batchspawner), without a
running JupyterHub: the spawner object is built on an in-memory hub database, as
batchspawner's own tests do, and its real methods run against the cluster. ``start()``
pipes its rendered batch script (``--export=<names>``, ``--get-user-env=L``,
``--chdir``, ``%j`` output) to ``sbatch --parsable``, polls ``squeue -h -j ID -o '%T
%B'`` through its state regexes until RUNNING, and takes the host from the last word;
``stop()`` scancels; ``poll()`` reports the job gone. ``mock_port`` is batchspawner's
hook for tests that run no single-user server."""

import asyncio
import os
import pwd

from batchspawner import JobStatus, SlurmSpawner
from jupyterhub import orm
from jupyterhub.objects import Hub
from jupyterhub.user import User


def make_spawner(cluster, **traits):
    name = pwd.getpwuid(os.getuid()).pw_name
    db = orm.new_session_factory("sqlite://")()
    orm_user = orm.User(name=name)
    db.add(orm_user)
    db.commit()
    user = User(orm_user, {})
    spawner = SlurmSpawner(
        db=db,
        user=user,
        hub=Hub(),
        exec_prefix="",
        req_homedir=str(cluster.work),
        req_runtime="00:10:00",
        req_nprocs="1",
        req_memory="100M",
        batchspawner_singleuser_cmd="",
        cmd=["sh", "-c", "'env > spawner-env.txt; exec sleep 300'"],
        startup_poll_interval=0.2,
        # As a site configures it: the job submission commands and the cluster's
        # configuration (here: the front-ends' directory, SLUICE_CONF in system mode,
        # the personal controller's runtime dirs) reach sbatch through the hub's env.
        env_keep=["PATH", "PYTHONPATH", "SLUICE_CONF", "XDG_RUNTIME_DIR", "XDG_STATE_HOME"],
        **traits,
    )
    spawner.api_token = "token-for-the-test"
    spawner.mock_port = 12345
    return spawner


def test_start_poll_stop_through_the_spawner(cluster):
    spawner = make_spawner(cluster)

    async def scenario():
        ip, port = await asyncio.wait_for(spawner.start(), 120)
        running = await spawner.poll()
        status = spawner.job_status
        state = spawner.get_state()
        await asyncio.wait_for(spawner.stop(), 120)
        after = await spawner.poll()
        return ip, port, running, status, state, after

    ip, port, running, status, state, after = asyncio.run(scenario())
    job_id = state["job_id"]
    assert job_id.isdigit(), state
    assert port == 12345
    assert ip in cluster.nodes, status
    assert status.startswith("RUNNING "), status
    assert running is None  # still running
    assert after == 1  # gone once stopped
    assert spawner.job_id == ""  # clear_state() after the job disappeared
    rows = cluster.sacct(job_id, "JobID,JobName,State,WorkDir")
    assert rows[0]["JobName"] == "spawner-jupyterhub"
    assert rows[0]["State"].startswith("CANCELLED"), rows
    assert rows[0]["WorkDir"] == str(cluster.work)
    # --export=<names>: the values come from the environment sbatch was run with.
    env = dict(
        line.split("=", 1)
        for line in (cluster.work / "spawner-env.txt").read_text().splitlines()
        if "=" in line
    )
    assert env["JUPYTERHUB_API_TOKEN"] == "token-for-the-test"
    assert env["USER"] == pwd.getpwuid(os.getuid()).pw_name
    assert env["SLURM_JOB_ID"] == job_id
    assert (cluster.work / f"jupyterhub_slurmspawner_{job_id}.log").exists()


def test_query_regexes_against_pending_and_finished_jobs(cluster):
    # A held job is PENDING with exec host n/a: the pending regex matches, the
    # running one does not.
    spawner = make_spawner(cluster, req_options="--hold")

    async def scenario():
        await spawner.submit_batch_script()
        pending = await spawner.query_job_status()
        pending_status = spawner.job_status
        await spawner.cancel_batch_job()
        return pending, pending_status

    pending, pending_status = asyncio.run(scenario())
    assert pending == JobStatus.PENDING, pending_status
    assert pending_status == "PENDING n/a"
    assert spawner.state_ispending()
    assert not spawner.state_isrunning()
    cluster.wait_done(spawner.job_id)

    async def after_cancel():
        return await spawner.query_job_status()

    # `squeue -j ID` shows no finished job without `-t` (as Slurm's: see
    # golden/completed_visibility.txt): an empty status, which batchspawner takes as
    # the job being gone.
    assert asyncio.run(after_cancel()) == JobStatus.NOTFOUND
    assert spawner.job_status == ""
