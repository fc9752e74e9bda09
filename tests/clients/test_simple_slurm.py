"""simple_slurm (https://github.com/amq92/simple_slurm): ``Slurm.sbatch`` pipes a here
document to sbatch and parses the id out of ``Submitted batch job N`` (or ``--parsable``
output); its squeue wrapper reads ``squeue --me -o '"%i","%j",…'`` as CSV with a header
row; its scancel wrapper needs exit status 0."""

from simple_slurm import Slurm


def test_sbatch_array_parses_id_and_runs_every_task(cluster):
    slurm = Slurm(
        job_name="simple",
        array=range(0, 3),
        cpus_per_task=1,
        output=f"{cluster.work}/simple-%A_%a.out",
    )
    # The here document is unquoted: simple_slurm escapes `$` itself (convert=True).
    job_id = slurm.sbatch("echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID", verbose=False)
    assert isinstance(job_id, int) and job_id > 0
    states = cluster.wait_done(job_id)
    assert states == {f"{job_id}_{i}": "COMPLETED" for i in range(3)}
    for i in range(3):
        text = (cluster.work / f"simple-{job_id}_{i}.out").read_text()
        assert text == f"task {i} of {job_id}\n"


def test_parsable_sbatch_and_the_squeue_and_scancel_wrappers(cluster):
    slurm = Slurm(job_name="sleeper", parsable=True, output="/dev/null", time="00:05:00")
    job_id = slurm.sbatch("sleep 300", verbose=False)
    assert isinstance(job_id, int)
    slurm.squeue.update_squeue()
    jobs = slurm.squeue.jobs
    assert job_id in jobs, jobs
    row = jobs[job_id]
    assert row["NAME"] == "sleeper"
    assert row["ST"] in ("PD", "R")
    assert row["NODES"] == "1"
    assert slurm.squeue.get_filtered_jobs("sleep") == {job_id: row}
    slurm.scancel.cancel_job(job_id)
    assert cluster.wait_done(job_id) == {str(job_id): "CANCELLED"}


def test_srun_outside_an_allocation_returns_its_exit_code(cluster):
    slurm = Slurm(ntasks=2, output=f"{cluster.work}/srun-%t.out")
    assert slurm.srun("sh -c 'echo hi from $SLURM_PROCID'") == 0
    got = sorted((cluster.work / f"srun-{t}.out").read_text() for t in range(2))
    assert got == ["hi from 0\n", "hi from 1\n"]
